"""Cuts streamed model text into cited segments: the units that are verified and then released.

A segment is a run of sentences that ends with a sentence carrying a citation, plus any citation
markers that directly follow it (``Foo. [S1]``); a marker followed by what opens a new unit (a
capital, a digit, inline code: ``row [S1] `next` row [S2]``) also ends one, so a unit without a
full stop is never checked together with the next unit's first sentence. Uncited sentences wait for the next cited one,
so a sentence is never released before the citation that covers it has arrived. Boundaries are
sentence ends (``. ! ?`` before whitespace, ``。！？``) and line ends; none is taken inside a
quotation or a fenced code block, so a quote is always checked whole. Text left over at the end
with no citation is the *tail*, which the caller must not release unverified.

Scanning is incremental (each character is looked at about once), so a long uncited answer costs
linear time, not quadratic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ragmesh_generation.citations import CITATION
from ragmesh_generation.support import is_abbreviation

_ASCII_ENDS = ".!?"
_WIDE_ENDS = "。！？"
# Punctuation that may follow a trailing citation and still belongs to the sentence: "Foo [S1]."
_AFTER_MARKER = ".,;:!?。，；：！？)"
_OPENERS = {'"': '"', "“": "”", "「": "」", "『": "』"}
_CLOSERS = "\"'”’」』)"  # may stand between a sentence end and a citation marker
_FENCES = ("```", "~~~")
_UNFINISHED_MARKER = re.compile(r"\[\s*(?:S\d*(?:\s*[,;]\s*(?:S\d*)?)*)?\s*\Z")


@dataclass
class _ScanState:
    pos: int = 0  # next character to look at
    cited: bool = False  # a citation marker was seen since the segment started
    fence: bool = False
    closer: str | None = None  # the closing mark of an open quotation
    quotes: bool = True  # False once the stream ended inside a quotation that never closed
    line_start: bool = True
    boundary: int | None = None  # a sentence end waiting for look-ahead (trailing markers)


@dataclass
class SegmentBuffer:
    """Feed model text in; take complete cited segments out."""

    _text: str = ""
    _state: _ScanState = field(default_factory=_ScanState)
    _starts_line: bool = True  # whether the pending text begins at the start of a line

    @property
    def pending(self) -> str:
        """Text received but not yet part of a released segment."""
        return self._text

    def feed(self, text: str) -> list[str]:
        self._text += text
        return self._drain(final=False)

    def finish(self) -> tuple[list[str], str]:
        """At the end of the stream: the last segments, and the uncited tail (may be empty)."""
        segments = self._drain(final=True)
        if self._state.closer is not None:
            # A quotation mark that never closed (5" pipe) quotes nothing; scan the rest again
            # without it so the citations behind it still count.
            self._state = _ScanState(line_start=self._starts_line, quotes=False)
            segments += self._drain(final=True)
        tail, self._text, self._state = self._text, "", _ScanState()
        return segments, tail

    def _drain(self, *, final: bool) -> list[str]:
        segments = []
        while (end := self._next_end(final)) is not None:
            segment, self._text = self._text[:end], self._text[end:]
            self._starts_line = segment.endswith("\n")
            self._state = _ScanState(line_start=self._starts_line)
            segments.append(segment)
        return segments

    def _next_end(self, final: bool) -> int | None:
        """Where the current segment ends, or None until more text arrives."""
        text, st = self._text, self._state
        while True:
            if st.boundary is not None:
                end = self._after_trailing_markers(st.boundary, final)
                if end is None:
                    return None
                st.boundary = None
                return end
            if st.pos >= len(text):
                # The stream ended inside a cited sentence ("Foo [S1]" with no full stop).
                if final and st.cited and not st.fence and st.closer is None:
                    st.boundary = len(text)
                    continue
                return None
            if not self._step(text, st, final):
                return None

    def _step(self, text: str, st: _ScanState, final: bool) -> bool:
        """Look at one character (or a fence/marker). False: need more text to decide."""
        pos, ch = st.pos, text[st.pos]
        if st.line_start and ch in "`~":
            head = text[pos:pos + 3]
            if head in _FENCES:
                st.fence, st.pos, st.line_start = not st.fence, pos + 3, False
                return True
            if len(head) < 3 and any(f.startswith(head) for f in _FENCES) and not final:
                return False
        st.line_start = ch == "\n"
        if st.fence:
            st.pos += 1
            return True
        if ch == "\n":
            if st.closer is not None and text.startswith("\n\n", pos):
                st.closer = None  # an unbalanced quotation does not swallow the next paragraph
            st.pos += 1
            if st.closer is None and st.cited:
                st.boundary = pos
            return True
        if st.closer is not None:
            if ch == st.closer:
                st.closer = None
            st.pos += 1
            return True
        if ch in _OPENERS and st.quotes:
            st.closer = _OPENERS[ch]
            st.pos += 1
            return True
        if ch == "[":
            match = CITATION.match(text, pos)
            if match:
                if _ends_sentence(text, pos):  # "Foo. [S1]": the marker closes the sentence before it
                    st.boundary = match.end()
                else:
                    starts = _starts_unit(text, match.end())
                    if starts is None and not final:
                        return False  # look at this marker again once we know what follows
                    if starts:  # "row [S1] `next` row [S2]": a unit with no full stop ends at its marker
                        st.boundary = match.end()
                st.cited, st.pos = True, match.end()
                return True
            if not final and _UNFINISHED_MARKER.match(text, pos):
                return False
        st.pos += 1
        if ch in _WIDE_ENDS and st.cited:
            st.boundary = pos + 1
        elif ch in _ASCII_ENDS and st.cited:
            if pos + 1 >= len(text):
                if not final:
                    st.pos = pos  # look at this character again once we know what follows
                    return False
                st.boundary = pos + 1
            elif text[pos + 1].isspace() and not is_abbreviation(text, pos):
                st.boundary = pos + 1
        return True

    def _after_trailing_markers(self, end: int, final: bool) -> int | None:
        """Extend a sentence end over citation markers that follow it; None: wait for text."""
        text = self._text
        while True:
            ahead = end
            while ahead < len(text) and text[ahead].isspace():
                ahead += 1
            if ahead >= len(text):
                return end if final else None
            match = CITATION.match(text, ahead)
            if match:
                end = match.end()
                while end < len(text) and text[end] in _AFTER_MARKER:
                    end += 1
                continue
            if _UNFINISHED_MARKER.match(text, ahead):
                return end if final else None
            return end


def _starts_unit(text: str, end: int) -> bool | None:
    """Whether what follows a marker (after spaces) opens a new sentence or unit: a capital, a
    digit, inline code. None: not known yet. "Use e.g. [S1] now" and "[S1], so" go on."""
    ahead = end
    while ahead < len(text) and text[ahead] in " \t":
        ahead += 1
    if ahead >= len(text):
        return None
    if ahead == end:
        return False
    ch = text[ahead]
    return ch.isupper() or ch.isdigit() or ch == "`"


def _ends_sentence(text: str, marker: int) -> bool:
    """Whether the text before a citation marker ends a sentence (``Foo.``, ``"yes."``, ``(x).``)."""
    end = marker  # walked back in place: the pending text is not copied per marker (linear scan)
    while end > 0 and text[end - 1].isspace():
        end -= 1
    while end > 0 and text[end - 1] in _CLOSERS:
        end -= 1
    if end == 0:
        return False
    ch = text[end - 1]
    return ch in _WIDE_ENDS or (ch in _ASCII_ENDS and not is_abbreviation(text, end - 1))
