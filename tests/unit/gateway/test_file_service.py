"""FileService against a real folder tree: only regular files inside the corpus root are served."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError

from gateway_fakes import LOCAL
from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.files.ports import ConfiguredCorpusRoots, IndexedSources
from ragmesh_gateway.files.service import FileService, media_type_of


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    root = tmp_path / "docs"
    (root / "guide").mkdir(parents=True)
    (root / "guide" / "intro.md").write_text("# Intro\n", encoding="utf-8")
    (root / "manual.pdf").write_bytes(b"%PDF-1.4\n")
    (root / ".env").write_text("SECRET=1\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    outside = tmp_path / "outside.txt"
    outside.write_text("not part of the corpus\n")
    (tmp_path / "docs-evil").mkdir()
    (tmp_path / "docs-evil" / "x.md").write_text("sibling folder sharing the root's name prefix\n")
    os.symlink(outside, root / "link-out.txt")
    os.symlink(tmp_path, root / "dir-link-out")
    os.symlink(root / "guide" / "intro.md", root / "link-in.md")
    return {"root": root, "outside": outside}


class RecordingIndex(IndexedSources):
    """Holds ``indexed`` (corpus, path) pairs; None: every path, so path checks are tested alone."""

    def __init__(self, indexed: set[tuple[str, str]] | None = None) -> None:
        self.indexed = indexed
        self.asked: list[tuple[str, str, tuple[str, ...]]] = []

    async def has_source(self, corpus: str, source_path: str, readable_corpora: tuple[str, ...]) -> bool:
        self.asked.append((corpus, source_path, readable_corpora))
        return self.indexed is None or (corpus, source_path) in self.indexed


def files(tree: dict[str, Path], index: IndexedSources | None = None) -> FileService:
    roots = ConfiguredCorpusRoots({"docs@1": str(tree["root"]), "secret@1": str(tree["root"])})
    return FileService(roots, index or RecordingIndex())


async def test_a_file_inside_the_root_is_found_with_its_media_type(tree) -> None:
    found = await files(tree).locate("docs@1", "guide/intro.md", LOCAL)
    assert found.path == (tree["root"] / "guide" / "intro.md").resolve()
    assert found.media_type == "text/markdown"
    assert found.filename == "intro.md"


async def test_a_symlink_that_stays_inside_the_root_is_allowed(tree) -> None:
    found = await files(tree).locate("docs@1", "link-in.md", LOCAL)
    assert found.path == (tree["root"] / "guide" / "intro.md").resolve()


@pytest.mark.parametrize(
    "path",
    [
        "../outside.txt",
        "guide/../../outside.txt",
        "guide/../intro.md",
        "./guide/intro.md",
        "/etc/passwd",
        "//etc/passwd",
        "guide//intro.md",
        "..",
        "",
        "guide\\..\\..\\outside.txt",
        "guide/intro.md\x00.png",
        ".env",
        ".git/config",
        "link-out.txt",
        "dir-link-out/outside.txt",
        "../docs-evil/x.md",
        "C:/Windows/win.ini",
        "guide",
        "guide/missing.md",
        "a" * 2000,
    ],
)
async def test_everything_else_is_the_same_not_found(tree, path: str) -> None:
    with pytest.raises(RagmeshError) as err:
        await files(tree).locate("docs@1", path, LOCAL)
    assert (err.value.code, err.value.message, err.value.details) == (
        ErrorCode.NOT_FOUND,
        "file not found",
        {},
    )


async def test_unreadable_and_unknown_corpora_look_like_missing_files(tree) -> None:
    reader = Caller("bob", readable_corpora=frozenset({"docs@1"}))
    errors = []
    for corpus, path in [
        ("secret@1", "guide/intro.md"),
        ("nope@1", "guide/intro.md"),
        ("docs@1", "guide/x.md"),
    ]:
        with pytest.raises(RagmeshError) as err:
            await files(tree).locate(corpus, path, reader)
        errors.append(err.value.to_body())
    assert errors[0] == errors[1] == errors[2] == {"code": "NOT_FOUND", "message": "file not found"}
    assert (await files(tree).locate("docs@1", "guide/intro.md", reader)).filename == "intro.md"


async def test_a_file_outside_the_active_index_is_the_same_not_found(tree) -> None:
    index = RecordingIndex({("docs@1", "guide/intro.md")})
    service = files(tree, index)
    assert (await service.locate("docs@1", "guide/intro.md", LOCAL)).filename == "intro.md"
    with pytest.raises(RagmeshError) as skipped:
        await service.locate("docs@1", "manual.pdf", LOCAL)  # on disk, but never indexed
    with pytest.raises(RagmeshError) as missing:
        await service.locate("docs@1", "guide/missing.md", LOCAL)
    assert skipped.value.to_body() == missing.value.to_body() == {"code": "NOT_FOUND", "message": "file not found"}


async def test_the_index_is_asked_only_about_readable_corpora_and_safe_paths(tree) -> None:
    index = RecordingIndex()
    service = files(tree, index)
    reader = Caller("bob", readable_corpora=frozenset({"docs@1"}))
    for corpus, path in [("secret@1", "guide/intro.md"), ("docs@1", "../outside.txt"), ("docs@1", ".env")]:
        with pytest.raises(RagmeshError):
            await service.locate(corpus, path, reader)
    assert index.asked == []
    await service.locate("docs@1", "guide/intro.md", reader)
    assert index.asked == [("docs@1", "guide/intro.md", ("docs@1",))]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("a.md", "text/markdown"),
        ("a.rst", "text/x-rst"),
        ("a.txt", "text/plain"),
        ("a.PDF", "application/pdf"),
        ("a.html", "text/html"),
        ("a.json", "application/json"),
        ("a.png", "image/png"),
        ("a.unknownext", "application/octet-stream"),
    ],
)
def test_media_types(name: str, expected: str) -> None:
    assert media_type_of(name) == expected
