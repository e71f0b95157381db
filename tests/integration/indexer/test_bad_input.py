"""Bad input through the real build: every odd file is reported in the manifest with its reason,
the build never crashes, and a file that should be indexable but yields no text fails the whole
build (naming the file) before anything is written — so nothing partial can be promoted."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import alias_name
from ragmesh_indexer.registry import CorpusSpec

ROOT = Path(__file__).resolve().parents[3]
CORPUS = "mixed@1.0"


@pytest.fixture
def bad_corpus(tmp_path: Path) -> Path:
    """The committed mixed corpus plus what git cannot hold or should not carry."""
    root = tmp_path / "corpus"
    shutil.copytree(ROOT / "tests" / "fixtures" / "mixed_corpus", root, symlinks=True)
    outside = tmp_path / "outside-secret.md"
    outside.write_text("# Secret\n\nThis file lives outside the corpus root.\n", encoding="utf-8")
    (root / "escape.md").symlink_to(outside)  # a symlink leaving the root
    (root / "guide" / "alias.md").symlink_to(root / "guide" / "intro.md")  # one staying inside
    (root / "dangling.md").symlink_to(tmp_path / "does-not-exist.md")  # unreadable
    os.mkfifo(root / "pipe.md")  # reading it would block forever
    (root / "huge.md").write_text("# Huge\n\n" + "word " * 20_000, encoding="utf-8")  # over 64 KiB
    (root / "binary.md").write_bytes(b"# Looks like Markdown\x00\x01\x02")
    return root


def spec(root: Path) -> CorpusSpec:
    return CorpusSpec(id=CORPUS, library="mixed", version="1.0", root=str(root))


async def test_every_bad_file_is_reported_and_the_build_succeeds(indexer, bad_corpus: Path) -> None:
    out = await indexer.builder.build(spec(bad_corpus), force=False, actor="t", reason="t")
    report = {f.path: f for f in out.files}
    indexed = {p for p, f in report.items() if f.status == "indexed"}
    assert indexed == {"broken-frontmatter.md", "guide/alias.md", "guide/crlf.md", "guide/intro.md",
                       "manual.pdf", "notes.txt", "page.html", "zh/安装指南.md"}
    assert all(report[p].chunks > 0 for p in indexed)
    assert {p: f.reason for p, f in report.items() if f.status == "archived"} == {
        "binary.md": "binary", "broken-private.md": "index-false", "dangling.md": "unreadable",
        "escape.md": "symlink-outside-root", "huge.md": "too-large", "invalid-utf8.md": "invalid-utf8",
        "logo.png": "binary", "pipe.md": "special-file", "ports.csv": "unsupported-format",
        "private.md": "index-false",
    }
    assert all(f.chunks == 0 for f in report.values() if f.status != "indexed")
    assert report["broken-frontmatter.md"].warnings[0].startswith("broken-frontmatter")
    assert report["huge.md"].size > indexer.options.max_file_bytes
    assert report["escape.md"].raw_sha256 == ""  # never read

    # The manifest on disk says the same, file by file.
    manifest = json.loads(indexer.manifests.path_of(CORPUS, out.index_version).read_text())
    assert {f["path"]: (f["status"], f.get("reason", "")) for f in manifest["files"]} == {
        p: (f.status, f.reason) for p, f in report.items()}
    assert manifest["totals"]["indexed"] == len(indexed) and manifest["totals"]["failed"] == 0

    # What is indexed holds nothing from outside the root or from archived files.
    points, _ = await indexer.store.scroll(f"rm__mixed-1-0__{out.index_version}", limit=1000)
    assert {p.payload["source_path"] for p in points} == indexed
    assert not any("outside the corpus root" in p.payload["quote"] for p in points)
    passed, gates = await indexer.validator.validate(CORPUS, out.index_version)
    assert passed, [g for g in gates if not g.passed]


async def test_a_file_without_text_fails_the_build_by_name_and_nothing_moves(indexer, bad_corpus: Path) -> None:
    first = await indexer.builder.build(spec(bad_corpus), force=False, actor="t", reason="t")
    assert (await indexer.validator.validate(CORPUS, first.index_version))[0]
    await indexer.promoter.promote(CORPUS, first.index_version, actor="t", reason="t")
    versions_before = await indexer.registry.list_versions(CORPUS)

    (bad_corpus / "guide" / "empty.md").write_text("---\ntitle: Only metadata\n---\n", encoding="utf-8")
    (bad_corpus / "blank.txt").write_text("   \n\n", encoding="utf-8")
    with pytest.raises(RagmeshError) as exc:
        await indexer.builder.build(spec(bad_corpus), force=False, actor="t", reason="t")
    assert exc.value.code == ErrorCode.BUILD_FAILED
    assert "guide/empty.md" in exc.value.message and "blank.txt" in exc.value.message
    assert {f["path"] for f in exc.value.details["files"]} == {"guide/empty.md", "blank.txt"}
    # Failed before any version existed: no new registry row, no collection, the alias unchanged.
    assert await indexer.registry.list_versions(CORPUS) == versions_before
    aliases = await indexer.store.get_aliases()
    assert aliases[alias_name(CORPUS)].endswith(first.index_version)
    assert len(await indexer.store.list_collections()) == 1
