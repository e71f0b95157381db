"""Chunking strategies, selectable per corpus.

- ``heading``: one chunk per section (heading to next heading) when it fits ``max_chars``; larger
  sections are packed block by block up to ``max_chars``.
- ``split``: block-level chunks: small neighbouring blocks are merged until ``min_chars``, long
  blocks split at line (then sentence) boundaries.
- ``fixed``: windows of ``window_lines`` lines overlapping by ``overlap_lines``, ignoring
  structure (but never crossing a PDF page), capped at ``max_chars``.

Code blocks and tables stay whole up to ``max_atomic_chars`` in every structural strategy, and a
heading stays with the text under it (that chunk may exceed ``max_chars`` by the heading). A chunk
is always one contiguous slice of ``ParsedDocument.text``, so its quote keeps exact line numbers.
"""

from __future__ import annotations

import enum
import hashlib

import msgspec

from ragmesh_common.errors import ErrorCode, RagmeshError

from . import ids
from .model import Article, Block, Chunk, ParsedDocument, Parent, Section
from .text import LineIndex, line_spans, sha256_hex, split_long_span
from .urls import UrlScheme


class ChunkingStrategy(enum.StrEnum):
    HEADING = "heading"
    SPLIT = "split"
    FIXED = "fixed"


class ChunkingConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    strategy: ChunkingStrategy = ChunkingStrategy.HEADING
    max_chars: int = 1500
    min_chars: int = 300
    max_atomic_chars: int = 4000
    window_lines: int = 30
    overlap_lines: int = 5

    def __post_init__(self) -> None:
        if self.strategy not in ChunkingStrategy.__members__.values():
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "chunking strategy must be heading, split or fixed")
        if not 50 <= self.max_chars <= 100_000:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "chunking max_chars must be in [50, 100000]")
        if not 0 <= self.min_chars <= self.max_chars:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "chunking min_chars must be in [0, max_chars]")
        if self.max_atomic_chars < self.max_chars:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "chunking max_atomic_chars must be >= max_chars")
        if self.window_lines < 1 or not 0 <= self.overlap_lines < self.window_lines:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "chunking needs window_lines >= 1 and 0 <= overlap_lines < window_lines")

    @property
    def fingerprint(self) -> str:
        """Changes whenever any setting changes: part of the index's config hash."""
        return hashlib.sha256(msgspec.json.encode(self)).hexdigest()[:16]


class _Piece(msgspec.Struct, frozen=True):
    start: int
    end: int
    line_start: int
    line_end: int
    page: int
    kind: str
    section: int
    first_in_block: bool


def chunk_document(
    doc: ParsedDocument, *, corpus: str, config: ChunkingConfig, urls: UrlScheme | None = None
) -> Article:
    urls = urls or UrlScheme()
    lines = LineIndex(doc.text) if doc.verbatim else None
    if config.strategy == ChunkingStrategy.FIXED:
        groups = _fixed_windows(doc, lines, config)
    else:
        flush_at = config.min_chars if config.strategy == ChunkingStrategy.SPLIT else config.max_chars + 1
        groups = []
        for index, section in enumerate(doc.sections):
            if section.has_body:
                pieces = [p for b in section.blocks for p in _block_pieces(doc, b, index, lines, config)]
                groups.extend(_pack(pieces, config.max_chars, flush_at))
    return _assemble(doc, corpus, config.strategy, urls, groups)


def _block_pieces(
    doc: ParsedDocument, block: Block, section: int, lines: LineIndex | None, config: ChunkingConfig
) -> list[_Piece]:
    length = block.end - block.start
    if length <= config.max_chars or (block.atomic and length <= config.max_atomic_chars):
        spans = [(block.start, block.end)]
    else:
        spans = _line_groups(doc.text, block.start, block.end, config.max_chars)
    return [_piece(block, s, e, section, lines, i == 0) for i, (s, e) in enumerate(spans)]


def _piece(block: Block, start: int, end: int, section: int, lines: LineIndex | None, first: bool) -> _Piece:
    if lines is not None:
        line_start, line_end = lines.lines_of(start, end)
    else:  # HTML keeps its block's source lines; PDF has only pages
        line_start, line_end = block.line_start, block.line_end
    return _Piece(start, end, line_start, line_end, block.page, block.kind, section, first)


def _line_groups(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Consecutive lines of a block packed up to max_chars; an over-long line is cut inside."""
    groups: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for s, e in line_spans(text, start, end):
        if e - s > max_chars:
            if current:
                groups.append(current)
                current = None
            groups.extend(split_long_span(text, s, e, max_chars))
        elif current and e - current[0] <= max_chars:
            current = (current[0], e)
        else:
            if current:
                groups.append(current)
            current = (s, e)
    if current:
        groups.append(current)
    return groups


def _pack(pieces: list[_Piece], max_chars: int, flush_at: int) -> list[list[_Piece]]:
    groups: list[list[_Piece]] = []
    current: list[_Piece] = []
    for piece in pieces:
        # A heading never ends a chunk on its own: it belongs with the text under it.
        if current and not all(p.kind == "heading" for p in current):
            too_long = piece.end - current[0].start > max_chars
            long_enough = piece.first_in_block and current[-1].end - current[0].start >= flush_at
            if too_long or long_enough:
                groups.append(current)
                current = []
        current.append(piece)
    if current:
        groups.append(current)
    return groups


def _fixed_windows(doc: ParsedDocument, lines: LineIndex | None, config: ChunkingConfig) -> list[list[_Piece]]:
    units: list[_Piece] = []
    for index, section in enumerate(doc.sections):
        for block in section.blocks:
            for line_start, line_end in line_spans(doc.text, block.start, block.end):
                for s, e in split_long_span(doc.text, line_start, line_end, config.max_chars):
                    units.append(_piece(block, s, e, index, lines, False))
    windows: list[list[_Piece]] = []
    first = 0
    while first < len(units):
        last = first + 1
        while (
            last < len(units)
            and last - first < config.window_lines
            and units[last].page == units[first].page
            and units[last].end - units[first].start <= config.max_chars
        ):
            last += 1
        windows.append(units[first:last])
        if last >= len(units):
            break
        first = max(first + 1, last - config.overlap_lines)
        if units[first].page != units[last].page:
            first = last  # overlap never reaches back across a page break
    return windows


def _assemble(
    doc: ParsedDocument, corpus: str, strategy: str, urls: UrlScheme, groups: list[list[_Piece]]
) -> Article:
    document_id = ids.doc_id(corpus, doc.path)
    parents: dict[int, Parent] = {}
    parent_seen: dict[tuple[str, str], int] = {}
    chunk_seen: dict[str, int] = {}
    chunks: list[Chunk] = []
    for group in groups:
        section_index = group[0].section
        section = doc.sections[section_index]
        if section_index not in parents:
            parents[section_index] = _parent(doc, document_id, section, urls, parent_seen)
        text = doc.text[group[0].start : group[-1].end]
        occurrence = chunk_seen.get(text, 0)
        chunk_seen[text] = occurrence + 1
        kinds = {p.kind for p in group if p.kind != "heading"} or {"heading"}
        chunks.append(
            Chunk(
                chunk_id=ids.chunk_id(document_id, strategy, text, occurrence),
                doc_id=document_id,
                parent_id=parents[section_index].parent_id,
                path=doc.path,
                strategy=str(strategy),
                ordinal=len(chunks),
                text=text,
                title=doc.title,
                heading_path=section.heading_path,
                anchor=section.anchor,
                url=urls.anchor_url(doc.path, section.anchor),
                line_start=min(p.line_start for p in group),
                line_end=max(p.line_end for p in group),
                page=group[0].page,
                kind=kinds.pop() if len(kinds) == 1 else "mixed",
                content_sha256=sha256_hex(text),
                tags=doc.tags,
            )
        )
    return Article(
        doc_id=document_id,
        path=doc.path,
        title=doc.title,
        url=urls.document_url(doc.path),
        parser=doc.parser,
        tags=doc.tags,
        parents=list(parents.values()),
        chunks=chunks,
    )


def _parent(
    doc: ParsedDocument, document_id: str, section: Section, urls: UrlScheme, seen: dict[tuple[str, str], int]
) -> Parent:
    text = doc.text[section.start : section.end]
    key = ("\x1f".join(section.heading_path), text)
    occurrence = seen.get(key, 0)
    seen[key] = occurrence + 1
    return Parent(
        parent_id=ids.parent_id(document_id, section.heading_path, text, occurrence),
        doc_id=document_id,
        heading_path=section.heading_path,
        anchor=section.anchor,
        url=urls.anchor_url(doc.path, section.anchor),
        text=text,
        line_start=section.line_start,
        line_end=section.line_end,
        page=section.page,
    )

