"""Plain text: paragraphs are runs of non-blank lines; the whole file is one section."""

from __future__ import annotations

import posixpath
import re

from ..model import Block, ParsedDocument
from ..text import LineIndex, trim_span
from .sections import SectionBuilder

_PARAGRAPH = re.compile(r"(?:[^\n]*\S[^\n]*(?:\n|$))+")


def parse_plaintext(path: str, text: str) -> ParsedDocument:
    lines = LineIndex(text)
    builder = SectionBuilder()
    for match in _PARAGRAPH.finditer(text):
        start, end = trim_span(text, match.start(), match.end())
        if end > start:
            line_start, line_end = lines.lines_of(start, end)
            builder.add(Block(kind="paragraph", start=start, end=end, line_start=line_start, line_end=line_end))
    return ParsedDocument(
        path=path,
        parser="text",
        title=posixpath.splitext(posixpath.basename(path))[0],
        text=text,
        sections=builder.finish(),
    )
