"""A normalized view of untrusted text that rules match against, mapped back to original offsets.

Attackers hide keywords with invisible characters ("ig<U+200B>nore") and look-alike forms
(fullwidth "ｉｇｎｏｒｅ"). Rules therefore run on a view where each character is NFKC-normalized and
invisible characters are dropped; every view character remembers the original offset it came
from, so findings and edits always refer to the original text.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from ragmesh_gateway.security.findings import Severity

# Bidi embeddings/overrides/isolates reorder what a reader sees ("Trojan Source").
_BIDI_CONTROLS = frozenset(range(0x202A, 0x202F)) | frozenset(range(0x2066, 0x206A))
_ZERO_WIDTH = frozenset({0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2060, 0x2061, 0x2062, 0x2063, 0x2064,
                         0xFEFF, 0x00AD, 0x180E, 0x034F, 0x115F, 0x1160, 0x3164, 0xFFA0})
# Tag characters (U+E0000..U+E007F) mirror ASCII invisibly: the classic "ASCII smuggling" carrier.
_TAGS = range(0xE0000, 0xE0080)
# Variation selectors supplement can encode arbitrary bytes after an emoji.
_VARIATION_SUPPLEMENT = range(0xE0100, 0xE01F0)
# Joiners are legitimate inside emoji sequences and Indic/Persian words.
_JOINERS = frozenset({0x200C, 0x200D})


def invisible_severity(ch: str) -> Severity | None:
    """Severity of an invisible or reordering character, None for an ordinary one."""
    cp = ord(ch)
    if cp < 0xAD:
        return None
    if cp in _BIDI_CONTROLS or cp in _TAGS:
        return Severity.HIGH
    if cp in _ZERO_WIDTH or cp in _VARIATION_SUPPLEMENT:
        return Severity.MEDIUM
    return None


def _maybe_invisible(ch: str) -> bool:
    return ch >= "\u00ad" and invisible_severity(ch) is not None


def visible_escape(ch: str) -> str:
    """Python-style escape as plain text: U+202E becomes the six characters ``\\u202e``."""
    cp = ord(ch)
    return f"\\u{cp:04x}" if cp <= 0xFFFF else f"\\U{cp:08x}"


def _is_word_char(ch: str) -> bool:
    return not ch.isascii() and not ch.isspace() and invisible_severity(ch) is None


def joiner_is_legitimate(text: str, index: int) -> bool:
    """ZWJ/ZWNJ between two non-ASCII visible characters (emoji, Persian, Devanagari) is normal."""
    if ord(text[index]) not in _JOINERS:
        return False
    return 0 < index < len(text) - 1 and _is_word_char(text[index - 1]) and _is_word_char(text[index + 1])


@dataclass(frozen=True, slots=True)
class TextView:
    original: str
    text: str
    # origin[i] = offset in ``original`` of view character i; None when the view is the original.
    origin: list[int] | None

    @classmethod
    def of(cls, original: str) -> TextView:
        if original.isascii() or (
            unicodedata.is_normalized("NFKC", original) and not any(map(_maybe_invisible, original))
        ):
            return cls(original, original, None)
        chars: list[str] = []
        origin: list[int] = []
        for index, ch in enumerate(original):
            if invisible_severity(ch) is not None:
                continue
            normalized = unicodedata.normalize("NFKC", ch) if ord(ch) > 0x7F else ch
            chars.append(normalized)
            origin.extend([index] * len(normalized))
        return cls(original, "".join(chars), origin)

    def to_original(self, start: int, end: int) -> tuple[int, int]:
        """Map a view span [start, end) to the smallest original span covering it."""
        if self.origin is None:
            return start, end
        if start >= len(self.origin):
            return len(self.original), len(self.original)
        first = self.origin[start]
        last = self.origin[end - 1] + 1 if end > start else first
        return first, last

    def original_offset(self, view_index: int) -> int:
        if self.origin is None:
            return view_index
        if view_index >= len(self.origin):
            return len(self.original)
        return self.origin[view_index]
