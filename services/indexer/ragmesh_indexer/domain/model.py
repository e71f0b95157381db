"""Domain types of the indexer: what a scan finds, what a parser reads, what chunking emits.

Offsets (``start``/``end``) index ``ParsedDocument.text``; a chunk's text is always one contiguous
slice of it, so for Markdown and plain text (where ``text`` is the file itself, CR-stripped and NFC)
the quote is verbatim source. Lines are 1-based and inclusive; ``page`` is the physical PDF page
(1-based) and 0 for formats without pages; PDF chunks carry lines 0 and a page.
"""

from __future__ import annotations

import enum
from typing import Any

import msgspec


class FileStatus(enum.StrEnum):
    INDEXED = "indexed"
    ARCHIVED = "archived"  # deliberately not indexed; ``reason`` says why
    FAILED = "failed"  # should have been indexable but was not (a build error)


class ArchiveReason(enum.StrEnum):
    BINARY = "binary"
    INVALID_UTF8 = "invalid-utf8"
    TOO_LARGE = "too-large"
    SYMLINK_OUTSIDE_ROOT = "symlink-outside-root"
    INDEX_FALSE = "index-false"
    UNSUPPORTED_FORMAT = "unsupported-format"
    UNREADABLE = "unreadable"
    SPECIAL_FILE = "special-file"  # a FIFO, socket or device: reading one could block forever
    SYMLINKED_DIRECTORY = "symlinked-directory"  # not followed; its real path is scanned instead


class FailureReason(enum.StrEnum):
    NO_TEXT = "no-text"
    PARSE_ERROR = "parse-error"


class FileWarning(enum.StrEnum):
    # Broken frontmatter does not archive a file: its body is indexed and the scan reports this
    # warning, because authors expect their page to be searchable despite a metadata typo. The one
    # exception (an ``index: false`` line inside the broken block) archives it instead.
    BROKEN_FRONTMATTER = "broken-frontmatter"


class Block(msgspec.Struct, frozen=True):
    """One structural unit: a paragraph, a code fence, a table, a list, a heading line."""

    kind: str  # heading | paragraph | code | table | list | quote | html
    start: int
    end: int
    line_start: int
    line_end: int
    page: int = 0

    @property
    def atomic(self) -> bool:
        """Code and tables lose their meaning when cut, so they stay whole where size allows."""
        return self.kind in ("code", "table")


class Section(msgspec.Struct, frozen=True):
    """The content under one heading up to the next heading (or one PDF page)."""

    heading_path: list[str]
    anchor: str
    level: int  # 0 for the preamble before the first heading and for PDF pages
    blocks: list[Block]
    page: int = 0

    @property
    def start(self) -> int:
        return self.blocks[0].start

    @property
    def end(self) -> int:
        return self.blocks[-1].end

    @property
    def line_start(self) -> int:
        return min(b.line_start for b in self.blocks)

    @property
    def line_end(self) -> int:
        return max(b.line_end for b in self.blocks)

    @property
    def has_body(self) -> bool:
        return any(b.kind != "heading" for b in self.blocks)


class ParsedDocument(msgspec.Struct):
    path: str  # relative POSIX path inside the corpus root
    parser: str  # markdown | text | html | pdf
    title: str
    text: str
    sections: list[Section]
    tags: list[str] = []
    metadata: dict[str, Any] = {}
    warnings: list[str] = []
    index: bool = True  # False when frontmatter says ``index: false``
    # True where ``text`` is the file itself (CR-stripped, NFC) so every quote is verbatim.
    verbatim: bool = True
    page_count: int = 0


class Parent(msgspec.Struct, frozen=True):
    """A section as retrieval returns it for parent expansion."""

    parent_id: str
    doc_id: str
    heading_path: list[str]
    anchor: str
    url: str
    text: str
    line_start: int
    line_end: int
    page: int = 0


class Chunk(msgspec.Struct, frozen=True):
    chunk_id: str
    doc_id: str
    parent_id: str
    path: str
    strategy: str
    ordinal: int  # position within its document
    text: str  # the quote: verbatim for Markdown/text/PDF, extracted text for HTML
    title: str
    heading_path: list[str]
    anchor: str
    url: str
    line_start: int
    line_end: int
    page: int
    kind: str  # the block kind when the chunk is one kind (code, table...), else "mixed"
    content_sha256: str
    tags: list[str] = []


class Article(msgspec.Struct):
    """A chunked document: Article -> Parent (section) -> Chunk."""

    doc_id: str
    path: str
    title: str
    url: str
    parser: str
    tags: list[str]
    parents: list[Parent]
    chunks: list[Chunk]


class ManifestEntry(msgspec.Struct, frozen=True):
    path: str
    status: str  # FileStatus value
    size: int
    raw_sha256: str = ""
    canonical_sha256: str = ""
    parser: str = ""
    reason: str = ""  # ArchiveReason / FailureReason value ("" when indexed)
    detail: str = ""  # safe for clients: never document text
    warnings: list[str] = []


class Manifest(msgspec.Struct, frozen=True):
    root: str
    entries: list[ManifestEntry]
    corpus_sha256: str  # over (path, status, canonical hash) of every entry: "did anything change?"

    def by_status(self, status: FileStatus) -> list[ManifestEntry]:
        return [e for e in self.entries if e.status == status]


class FileIssue(msgspec.Struct, frozen=True):
    path: str
    reason: str
    detail: str = ""


class ScanResult(msgspec.Struct):
    manifest: Manifest
    documents: list[ParsedDocument]
    errors: list[FileIssue]  # files that should be indexable but yielded nothing
    warnings: list[FileIssue]
