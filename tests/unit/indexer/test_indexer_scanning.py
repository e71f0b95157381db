"""Scanning: one manifest entry per file, bad files archived with a reason, never a crash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_indexer.domain import (
    ChunkingConfig,
    ScanConfig,
    canonical_sha256,
    chunk_document,
    require_all_indexable,
    scan_corpus,
    sha256_hex,
)


def _entries(result):
    return {e.path: e for e in result.manifest.entries}


def test_manifest_records_every_file_with_status_and_reason(corpus_copy: Path) -> None:
    result = scan_corpus(corpus_copy)
    entries = _entries(result)
    indexed = {p for p, e in entries.items() if e.status == "indexed"}
    assert indexed == {
        "broken-frontmatter.md", "guide/alias.md", "guide/crlf.md", "guide/intro.md", "manual.pdf",
        "notes.txt", "page.html", "zh/安装指南.md",
    }
    archived = {p: e.reason for p, e in entries.items() if e.status == "archived"}
    assert archived == {
        "broken-private.md": "index-false",
        "escape.md": "symlink-outside-root",
        "invalid-utf8.md": "invalid-utf8",
        "logo.png": "binary",
        "ports.csv": "unsupported-format",
        "private.md": "index-false",
    }
    assert result.errors == []
    assert ".gitattributes" not in entries  # hidden files are tool state, not documents
    assert [d.path for d in result.documents] == sorted(indexed)


def test_entry_facts_are_recorded(mixed_corpus: Path) -> None:
    entries = _entries(scan_corpus(mixed_corpus))
    intro = entries["guide/intro.md"]
    data = (mixed_corpus / "guide/intro.md").read_bytes()
    assert intro.raw_sha256 == sha256_hex(data)
    assert intro.canonical_sha256 == canonical_sha256(data.decode())
    assert intro.size == len(data)
    assert intro.parser == "markdown"
    assert entries["manual.pdf"].parser == "pdf"
    assert entries["page.html"].parser == "html"
    assert entries["notes.txt"].parser == "text"
    assert entries["invalid-utf8.md"].raw_sha256 == sha256_hex((mixed_corpus / "invalid-utf8.md").read_bytes())


def test_broken_frontmatter_indexes_body_with_warning(mixed_corpus: Path) -> None:
    result = scan_corpus(mixed_corpus)
    entry = _entries(result)["broken-frontmatter.md"]
    assert entry.status == "indexed"
    assert entry.warnings and entry.warnings[0].startswith("broken-frontmatter")
    assert [w.path for w in result.warnings] == ["broken-frontmatter.md"]
    doc = next(d for d in result.documents if d.path == "broken-frontmatter.md")
    assert doc.title == "Broken Frontmatter"  # from the H1, the frontmatter being unreadable
    assert "still worth indexing" in doc.text


def test_symlink_leaving_root_is_not_read(corpus_copy: Path) -> None:
    result = scan_corpus(corpus_copy)
    assert all("outside the corpus root" not in d.text for d in result.documents)
    assert _entries(result)["escape.md"].raw_sha256 == ""


def test_canonical_hash_ignores_line_endings_and_trailing_space(tmp_path: Path) -> None:
    lf = "# Title\n\nSome caf\u00e9 text.\nSecond line.\n"
    (tmp_path / "lf.md").write_bytes(lf.encode())
    (tmp_path / "crlf.md").write_bytes(lf.replace("\n", "  \r\n").encode())
    # NFD spelling of the same word: canonical form is NFC
    (tmp_path / "nfd.md").write_bytes(lf.replace("\u00e9", "e\u0301").encode())
    entries = _entries(scan_corpus(tmp_path))
    assert entries["lf.md"].canonical_sha256 == entries["crlf.md"].canonical_sha256
    assert entries["lf.md"].canonical_sha256 == entries["nfd.md"].canonical_sha256
    assert len({entries[p].raw_sha256 for p in ("lf.md", "crlf.md", "nfd.md")}) == 3
    (tmp_path / "lf.md").write_bytes(lf.replace("Second", "Third").encode())
    assert _entries(scan_corpus(tmp_path))["lf.md"].canonical_sha256 != entries["lf.md"].canonical_sha256


def test_file_without_text_is_a_build_error(tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text("# Fine\n\nBody.\n", encoding="utf-8")
    (tmp_path / "only-frontmatter.md").write_text("---\ntitle: Empty\n---\n", encoding="utf-8")
    (tmp_path / "blank.txt").write_text("   \n\n", encoding="utf-8")
    (tmp_path / "not-really.pdf").write_bytes(b"this is not a pdf")
    result = scan_corpus(tmp_path)
    failed = {e.path: e.reason for e in result.errors}
    assert failed == {"only-frontmatter.md": "no-text", "blank.txt": "no-text", "not-really.pdf": "parse-error"}
    assert _entries(result)["good.md"].status == "indexed"
    with pytest.raises(RagmeshError) as info:
        require_all_indexable(result)
    assert info.value.code is ErrorCode.BUILD_FAILED
    for path in failed:
        assert path in info.value.message
    assert {f["path"] for f in info.value.details["files"]} == set(failed)


def test_require_all_indexable_passes_a_clean_scan(mixed_corpus: Path) -> None:
    require_all_indexable(scan_corpus(mixed_corpus))


def test_hostile_files_never_crash_the_scan(tmp_path: Path) -> None:
    (tmp_path / "random.md").write_bytes(os.urandom(4096))
    (tmp_path / "deep.html").write_text("<div>" * 5000 + "deep text" + "</div>" * 5000, encoding="utf-8")
    (tmp_path / "garbage.pdf").write_bytes(b"%PDF-1.4\n" + os.urandom(2048))
    (tmp_path / "empty.md").write_bytes(b"")
    (tmp_path / "nul.txt").write_bytes(b"text\x00with nul")
    (tmp_path / "dangling.md").symlink_to(tmp_path / "missing.md")
    (tmp_path / "loop.md").symlink_to(tmp_path / "loop.md")
    os.mkfifo(tmp_path / "pipe.md")
    result = scan_corpus(tmp_path)
    entries = _entries(result)
    assert set(entries) == {"random.md", "deep.html", "garbage.pdf", "empty.md", "nul.txt", "dangling.md",
                            "loop.md", "pipe.md"}
    assert entries["random.md"].status == "archived"
    assert entries["random.md"].reason in ("binary", "invalid-utf8")
    assert entries["nul.txt"].reason == "binary"
    assert entries["dangling.md"].reason == "unreadable"
    assert entries["loop.md"].reason == "unreadable"
    assert entries["pipe.md"].reason == "special-file"
    assert entries["empty.md"].status == "failed"
    assert entries["garbage.pdf"].status == "failed"
    assert entries["deep.html"].status == "indexed"  # deeper than the recursion limit
    assert any(d.path == "deep.html" and d.text == "deep text" for d in result.documents)


def test_too_large_files_are_archived_unread(tmp_path: Path) -> None:
    (tmp_path / "big.md").write_text("# Big\n\n" + "word " * 100, encoding="utf-8")
    (tmp_path / "small.md").write_text("# Small\n\nok\n", encoding="utf-8")
    entries = _entries(scan_corpus(tmp_path, ScanConfig(max_file_bytes=100)))
    assert entries["big.md"].status == "archived"
    assert entries["big.md"].reason == "too-large"
    assert entries["big.md"].raw_sha256 == ""
    assert entries["small.md"].status == "indexed"


def test_include_and_exclude_globs(mixed_corpus: Path) -> None:
    only_guide = scan_corpus(mixed_corpus, ScanConfig(include=["guide/**"]))
    assert {e.path for e in only_guide.manifest.entries} == {"guide/crlf.md", "guide/intro.md"}
    markdown_anywhere = scan_corpus(mixed_corpus, ScanConfig(include=["*.md"], exclude=["zh", "broken-*"]))
    assert {e.path for e in markdown_anywhere.manifest.entries} == {
        "guide/crlf.md", "guide/intro.md", "invalid-utf8.md", "private.md",
    }
    no_pdf = scan_corpus(mixed_corpus, ScanConfig(exclude=["**/*.pdf", "*.png"]))
    paths = {e.path for e in no_pdf.manifest.entries}
    assert "manual.pdf" not in paths and "logo.png" not in paths and "notes.txt" in paths
    hidden = scan_corpus(mixed_corpus, ScanConfig(include=[".*"], include_hidden=True))
    assert {e.path for e in hidden.manifest.entries} == {".gitattributes"}


def test_corpus_hash_is_stable_and_tracks_changes(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nalpha\n", encoding="utf-8")
    first = scan_corpus(tmp_path).manifest.corpus_sha256
    assert scan_corpus(tmp_path).manifest.corpus_sha256 == first
    (tmp_path / "a.md").write_bytes(b"# A\r\n\r\nalpha  \r\n")  # same canonical content
    assert scan_corpus(tmp_path).manifest.corpus_sha256 == first
    (tmp_path / "b.md").write_text("# B\n\nbeta\n", encoding="utf-8")
    assert scan_corpus(tmp_path).manifest.corpus_sha256 != first


def test_missing_root_is_an_invalid_argument(tmp_path: Path) -> None:
    with pytest.raises(RagmeshError) as info:
        scan_corpus(tmp_path / "nope")
    assert info.value.code is ErrorCode.INVALID_ARGUMENT


def test_every_indexed_document_yields_chunks(mixed_corpus: Path) -> None:
    for doc in scan_corpus(mixed_corpus).documents:
        assert chunk_document(doc, corpus="mixed", config=ChunkingConfig()).chunks, doc.path
