"""One real parser per format, chosen by file extension."""

from __future__ import annotations

import posixpath

from ..model import ParsedDocument
from ..text import decode_utf8, normalize_source
from .html import parse_html
from .markdown import parse_markdown
from .pdf import page_texts, parse_pdf
from .plaintext import parse_plaintext

_BY_EXTENSION = {
    ".md": "markdown", ".markdown": "markdown", ".mdown": "markdown", ".mkd": "markdown",
    ".txt": "text", ".text": "text", ".rst": "text", ".adoc": "text", "": "text",
    ".html": "html", ".htm": "html", ".xhtml": "html",
    ".pdf": "pdf",
}
PARSERS = frozenset(_BY_EXTENSION.values())


def parser_for(path: str) -> str | None:
    """The parser name for a path, or None for formats ragmesh does not read."""
    return _BY_EXTENSION.get(posixpath.splitext(path)[1].lower())


def parse_document(path: str, parser: str, data: bytes) -> ParsedDocument:
    """Parse raw file bytes. Text formats must be UTF-8 (raises UnicodeDecodeError otherwise)."""
    if parser == "pdf":
        return parse_pdf(path, data)
    return parse_text(path, parser, decode_utf8(data))


def parse_text(path: str, parser: str, decoded: str) -> ParsedDocument:
    """Parse an already decoded text format (markdown, html, text)."""
    text = normalize_source(decoded)
    if parser == "markdown":
        return parse_markdown(path, text)
    if parser == "html":
        return parse_html(path, text)
    if parser == "text":
        return parse_plaintext(path, text)
    raise ValueError(f"unknown parser {parser!r}")


__all__ = ["PARSERS", "page_texts", "parse_document", "parse_text", "parser_for"]
