"""Does a chunk's quote really sit at its recorded lines (or page) of the original file?

Used by the validation gates and the tests. Lines follow :mod:`text`'s rule (CR stripped, LF
splits). The check tries, in order: the quote as an exact substring of the window; the same with
trailing whitespace per line and then all whitespace ignored; and for markup (HTML) the window with
tags removed and entities decoded, whitespace ignored. PDFs are checked against the text layer of
the recorded page.
"""

from __future__ import annotations

import enum
import html
import re

from .parsing import page_texts
from .text import decode_utf8, normalize_source

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_TAG = re.compile(r"<[A-Za-z/!?][^>]*>")


class QuoteMatch(enum.StrEnum):
    EXACT = "exact"
    WHITESPACE = "whitespace"  # equal once whitespace is ignored
    MARKUP = "markup"  # equal once tags are removed and whitespace ignored


class QuoteLocator:
    """Checks many quotes against one original file, decoding (or extracting pages) once."""

    def __init__(self, original: bytes | str) -> None:
        self._original = original
        self._lines: list[str] | None = None
        self._pages: list[str] | None = None

    def locate(self, quote: str, line_start: int, line_end: int, page: int = 0) -> QuoteMatch | None:
        wanted = normalize_source(quote).strip()
        if not wanted:
            return None
        window = self._page(page) if page > 0 else self._window(line_start, line_end)
        if window is None:
            return None
        return _compare(wanted, window)

    def found(self, quote: str, line_start: int, line_end: int, page: int = 0) -> bool:
        return self.locate(quote, line_start, line_end, page) is not None

    def _window(self, line_start: int, line_end: int) -> str | None:
        if self._lines is None:
            try:
                text = self._original if isinstance(self._original, str) else decode_utf8(self._original)
            except UnicodeDecodeError:
                text = ""
            self._lines = normalize_source(text).split("\n")
        if not 1 <= line_start <= line_end <= len(self._lines):
            return None
        return "\n".join(self._lines[line_start - 1 : line_end])

    def _page(self, page: int) -> str | None:
        if self._pages is None:
            try:
                self._pages = page_texts(self._original) if isinstance(self._original, bytes) else []
            except Exception:  # noqa: BLE001 - an unreadable PDF simply holds no quote
                self._pages = []
        return self._pages[page - 1] if page <= len(self._pages) else None


def locate_quote(
    original: bytes | str, quote: str, line_start: int, line_end: int, page: int = 0
) -> QuoteMatch | None:
    return QuoteLocator(original).locate(quote, line_start, line_end, page)


def quote_found_at(original: bytes | str, quote: str, line_start: int, line_end: int, page: int = 0) -> bool:
    """True when ``quote`` lies within lines [line_start, line_end] (1-based, inclusive) of the
    original file, or within the text layer of ``page`` (1-based) for a PDF."""
    return locate_quote(original, quote, line_start, line_end, page) is not None


def _compare(quote: str, window: str) -> QuoteMatch | None:
    if quote in window:
        return QuoteMatch.EXACT
    squeezed = _squeeze(quote)
    if squeezed in _squeeze(window):
        return QuoteMatch.WHITESPACE
    if "<" in window and squeezed in _squeeze(html.unescape(_TAG.sub("", _COMMENT.sub("", window)))):
        return QuoteMatch.MARKUP
    return None


def _squeeze(text: str) -> str:
    return "".join(text.split())
