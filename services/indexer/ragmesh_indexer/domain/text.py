"""Text normalisation, hashing and offset<->line arithmetic shared by parsers, chunking and gates.

Line numbering rule (used everywhere, including :mod:`quotes`): CRLF and lone CR become LF, then
lines are the pieces between LF characters. Nothing else counts as a line break, so U+2028 or a
form feed inside a line does not shift numbers the way ``str.splitlines`` would.
"""

from __future__ import annotations

import bisect
import hashlib
import re
import unicodedata

_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；])\s+|(?<=[。！？；])")


def normalize_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def normalize_source(text: str) -> str:
    """The text parsers see: newlines normalised and NFC (neither moves a line boundary)."""
    return unicodedata.normalize("NFC", normalize_newlines(text))


def canonical_text(text: str) -> str:
    """Newlines as LF, trailing whitespace stripped per line, NFC: edits that change no content
    (an editor switching CRLF, stray trailing blanks) keep the canonical hash."""
    lines = normalize_source(text).split("\n")
    return "\n".join(line.rstrip() for line in lines)


def sha256_hex(data: bytes | str) -> str:
    if isinstance(data, str):
        data = data.encode("utf-8")
    return hashlib.sha256(data).hexdigest()


def canonical_sha256(text: str) -> str:
    return sha256_hex(canonical_text(text))


def decode_utf8(data: bytes) -> str:
    """Strict UTF-8 (a BOM is dropped); raises UnicodeDecodeError for anything else."""
    return data.decode("utf-8-sig")


def collapse_whitespace(text: str) -> str:
    return " ".join(text.split())


class LineIndex:
    """Maps character offsets of one text to 1-based line numbers and back."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts = [0]
        self._starts.extend(m.end() for m in re.finditer("\n", text))

    @property
    def line_count(self) -> int:
        return len(self._starts)

    def line_of(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset)

    def offset_of(self, line: int, column: int = 0) -> int:
        return self._starts[line - 1] + column

    def line_span(self, line: int) -> tuple[int, int]:
        """Offsets of a line's content, newline excluded."""
        start = self._starts[line - 1]
        end = self._starts[line] - 1 if line < len(self._starts) else len(self.text)
        return start, end

    def lines_of(self, start: int, end: int) -> tuple[int, int]:
        """First and last line touched by the non-empty span [start, end)."""
        return self.line_of(start), self.line_of(max(start, end - 1))


def trim_span(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink [start, end) so it neither starts nor ends with whitespace."""
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def line_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Non-blank lines inside [start, end) as trimmed spans."""
    spans: list[tuple[int, int]] = []
    pos = start
    while pos < end:
        nl = text.find("\n", pos, end)
        stop = end if nl == -1 else nl
        s, e = trim_span(text, pos, stop)
        if e > s:
            spans.append((s, e))
        pos = stop + 1
    return spans


def split_long_span(text: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Cut one over-long span at sentence ends (Latin and CJK), falling back to a hard cut at
    the nearest whitespace, so each piece is a contiguous substring no longer than max_chars."""
    pieces: list[tuple[int, int]] = []
    cuts = [m.end() for m in _SENTENCE_END.finditer(text, start, end)]
    piece_start = start
    while end - piece_start > max_chars:
        limit = piece_start + max_chars
        fitting = [c for c in cuts if piece_start < c <= limit]
        cut = fitting[-1] if fitting else _whitespace_cut(text, piece_start, limit)
        s, e = trim_span(text, piece_start, cut)
        if e > s:
            pieces.append((s, e))
        piece_start = cut
    s, e = trim_span(text, piece_start, end)
    if e > s:
        pieces.append((s, e))
    return pieces


def _whitespace_cut(text: str, start: int, limit: int) -> int:
    # Prefer a word boundary in the second half of the window; CJK text has none, so cut hard.
    space = text.rfind(" ", start + 1, limit)
    return space if space > start + (limit - start) // 2 else limit
