"""Token-ish pieces of text: what the runtime streams, counts as usage and cuts at max_tokens.

A piece is a word with the whitespace before it, or a single CJK character or punctuation mark.
Joining the pieces gives back the text exactly.
"""

from __future__ import annotations

import re

_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
_PIECE = re.compile(rf"\s*(?:[{_CJK}]|[^\s{_CJK}]+)|\s+")


def word_chunks(text: str) -> list[str]:
    return _PIECE.findall(text)


def count_word_chunks(text: str) -> int:
    return sum(1 for _ in _PIECE.finditer(text))
