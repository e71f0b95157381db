"""Sentence splitting for English and Chinese evidence text.

Every sentence returned is an exact substring of the input (only outer whitespace and a leading
list/quote marker are trimmed), so an answer built from them quotes its sources verbatim.
"""

from __future__ import annotations

import re

# Words that end in a full stop without ending the sentence ("e.g. The", "Dr. Smith").
_ABBREVIATIONS = frozenset(
    "e.g i.e cf vs mr mrs ms dr prof sr jr st fig figs eq eqs ref refs no nos vol pp approx "
    "inc ltd co corp dept est al u.s u.k a.m p.m jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_CLOSERS = "\"'”’」』）)]》"
_CJK_END = re.compile(rf"[。！？]+[{re.escape(_CLOSERS)}]*")
_LATIN_END = re.compile(rf"[.!?]+[{re.escape(_CLOSERS)}]*(?=\s+\S)")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)$")
_SENTENCE_START = re.compile(r"[A-Z0-9\"'“‘(\[\u3400-\u9fff]")
# Lines that start a new block even without a blank line before them (markdown structure).
_BLOCK_START = re.compile(r"^\s*(#{1,6}\s|[-*+•]\s|\d{1,3}[.)]\s|>|\||```)")
_LEADING_MARKER = re.compile(r"^(?:[-*+•]\s+|\d{1,3}[.)]\s+|>\s*)")
_HAS_WORD = re.compile(r"[0-9A-Za-z\u3400-\u9fff]")


_FENCE = re.compile(r"^\s*(```|~~~)")
_MARKUP = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?>")


def split_sentences(text: str) -> list[str]:
    """Prose sentences only: code fences, headings, table rows and markup-laden lines are not
    answers — they are quoted structure, and an extractive answer made of them reads as noise."""
    sentences: list[str] = []
    fenced = _fenced_spans(text)
    for start, end in _blocks(text):
        if any(fs <= start < fe for fs, fe in fenced):
            continue
        head = text[start:end].lstrip()
        if head.startswith(("#", "|", "```", "~~~")):
            continue
        for piece in _split_block(text, start, end):
            sentences.extend(_between_markup(piece))
    return sentences


def _between_markup(piece: str) -> list[str]:
    """Tags are boundaries, never answer text: keep the prose between them."""
    if not _MARKUP.search(piece):
        return [piece]
    parts = (part.strip() for part in _MARKUP.split(piece) if part)
    return [part for part in parts if part and _HAS_WORD.search(part) and part in piece]


def _fenced_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    offset = 0
    opened: int | None = None
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            if opened is None:
                opened = offset
            else:
                spans.append((opened, offset + len(line)))
                opened = None
        offset += len(line)
    if opened is not None:
        spans.append((opened, offset))
    return spans


def _blocks(text: str) -> list[tuple[int, int]]:
    """Spans of paragraphs, list items, headings and table rows; wrapped lines stay together."""
    blocks: list[tuple[int, int]] = []
    block_start: int | None = None
    offset = 0
    previous_line = ""
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if not stripped:
            if block_start is not None:
                blocks.append((block_start, offset))
                block_start = None
        else:
            starts_block = _BLOCK_START.match(line) or previous_line.lstrip().startswith(("#", "|"))
            if block_start is not None and starts_block:
                blocks.append((block_start, offset))
                block_start = None
            if block_start is None:
                block_start = offset
        previous_line = stripped
        offset += len(line)
    if block_start is not None:
        blocks.append((block_start, offset))
    return blocks


def _split_block(text: str, start: int, end: int) -> list[str]:
    block = text[start:end]
    cuts = sorted({m.end() for m in _CJK_END.finditer(block)} | set(_latin_cuts(block)))
    pieces = []
    previous = 0
    for cut in [*cuts, len(block)]:
        piece = _LEADING_MARKER.sub("", block[previous:cut].strip()).strip()
        if piece and _HAS_WORD.search(piece):
            pieces.append(piece)
        previous = cut
    return pieces


def _latin_cuts(block: str) -> list[int]:
    cuts = []
    for match in _LATIN_END.finditer(block):
        following = block[match.end() :].lstrip()
        if not _SENTENCE_START.match(following):
            continue  # "e.g. the", "3.5 mm" and the like: the sentence goes on
        if match.group().rstrip(_CLOSERS) == ".":
            word = _WORD_BEFORE.search(block[: match.start()])
            if word is not None:
                token = word.group(1).lower().rstrip(".")
                if token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()):
                    continue  # "Dr. Smith", "J. Smith"
        cuts.append(match.end())
    return cuts
