"""PDF via pypdf's text layer: one section per physical page (1-based), lines recorded as 0.

``ParsedDocument.text`` is the pages' extracted text joined by form feeds; a chunk never leaves its
page, so its quote is a substring of that page's extracted text, which is what the quote gate
re-extracts and checks.
"""

from __future__ import annotations

import io
import posixpath
import re

from pypdf import PdfReader

from ..model import Block, ParsedDocument
from ..text import normalize_source, trim_span
from .sections import SectionBuilder

PAGE_SEPARATOR = "\n\f\n"
_PARAGRAPH = re.compile(r"(?:[^\n]*\S[^\n]*(?:\n|$))+")


def page_texts(data: bytes) -> list[str]:
    """Normalised text of every page; the quote gate uses the same function, so both sides agree."""
    return _page_texts(_open(data))


def parse_pdf(path: str, data: bytes) -> ParsedDocument:
    reader = _open(data)
    pages = _page_texts(reader)
    title = _metadata_title(reader) or posixpath.splitext(posixpath.basename(path))[0]
    builder = SectionBuilder()
    parts: list[str] = []
    offset = 0
    for number, page_text in enumerate(pages, start=1):
        builder.page(number, [title])
        for match in _PARAGRAPH.finditer(page_text):
            start, end = trim_span(page_text, match.start(), match.end())
            if end > start:
                builder.add(Block("paragraph", offset + start, offset + end, 0, 0, page=number))
        parts.append(page_text)
        offset += len(page_text) + len(PAGE_SEPARATOR)
    return ParsedDocument(
        path=path,
        parser="pdf",
        title=title,
        text=PAGE_SEPARATOR.join(parts),
        sections=builder.finish(),
        verbatim=False,
        page_count=len(pages),
    )


def _open(data: bytes) -> PdfReader:
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted:
        reader.decrypt("")  # many "protected" PDFs only restrict editing; a real lock raises later
    return reader


def _page_texts(reader: PdfReader) -> list[str]:
    return [normalize_source(page.extract_text() or "") for page in reader.pages]


def _metadata_title(reader: PdfReader) -> str:
    try:
        meta = reader.metadata
    except Exception:  # noqa: BLE001 - a broken info dictionary must not lose the text
        return ""
    title = meta.title if meta else None
    return str(title).strip() if title else ""
