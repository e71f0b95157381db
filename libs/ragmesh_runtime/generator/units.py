"""Answer units: the pieces of evidence an extractive answer is made of.

Documentation keeps facts in more shapes than sentences, so a source is read block by block:

- ``sentence``: prose, split by :func:`split_sentences`;
- ``table_row``: a body row of a Markdown pipe table, or of a tab-separated table (what the
  indexer makes of an HTML ``<table>``), shown with its column headers: ``max_parallel — Default:
  8; Description: Jobs that run at once on one worker``;
- ``list_item``: a bullet or numbered item, or a line of a block of short lines (a plain-text
  file's roster);
- ``key_value``: a line of a block of ``key: value`` lines;
- ``code_line``: a line of a fenced code block, shown as inline code after the sentence that led
  into the block (``Initialise the state folder once: `tern init --state /var/lib/tern```).

A unit has the ``text`` an answer shows — one line, inline Markdown removed except balanced
inline code, HTML entities decoded outside code (``&amp;`` reads ``&``; inside code it is what
the code says), never a fragment cut at markup — and the ``context`` it is scored with besides
(section heading, column headers, the lead-in sentence of a list or code block), because a table
cell or a code line rarely repeats the words of the question the way its surroundings do.

HTML comments (the docs' ``<!-- example: ... -->`` markers among them, and one a chunk boundary
cut open) and a leading front matter block are not text of the document: they never become units.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

from ragmesh_runtime.generator.sentences import split_sentences

SENTENCE, TABLE_ROW, LIST_ITEM, KEY_VALUE, CODE_LINE = "sentence", "table_row", "list_item", "key_value", "code_line"

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
_LIST_ITEM = re.compile(r"^(\s*)(?:[-*+•]|\d{1,3}[.)])\s+(.*)$")
_ORDERED = re.compile(r"^\s*\d{1,3}[.)]\s")
_PIPE_ROW = re.compile(r"^\s*\|.*\|\s*$")
_SEPARATOR_ROW = re.compile(r"^\s*\|?\s*:?-{2,}:?\s*(\|\s*:?-{2,}:?\s*)*\|?\s*$")
_KEY_VALUE = re.compile(r"^\s*([A-Za-z][\w .()/-]{0,40}?)\s*:\s+(\S.*)$")
_WORD = re.compile(r"[0-9A-Za-z\u3400-\u9fff]")
_WORDS = re.compile(r"[0-9A-Za-z]+|[\u3400-\u9fff]")

# Inline Markdown that never belongs in answer text.
_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_LINK = re.compile(r"\[([^\]]+)\]\((?:[^()]|\([^)]*\))*\)")
_REF_LINK = re.compile(r"\[([^\]]+)\]\[[^\]]*\]")
_STRONG = re.compile(r"(\*\*|__)(?=\S)(.+?)(?<=\S)\1")
_EMPHASIS = re.compile(r"(?<![\w*])([*_])(?=\S)(.+?)(?<=\S)\1(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_TAG = re.compile(r"</?[A-Za-z][\w-]*(?:\s[^<>]*)?/?>")
_CODE_SPAN = re.compile(r"(`+)(.+?)\1")
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_FRONT_MATTER = re.compile(r"\A\s*(---|\+\+\+)[ \t]*\n.*?\n\1[ \t]*(?:\n|\Z)", re.DOTALL)
_SPACES = re.compile(r"\s+")
# An entry's lead: one to four words, then "(", ":" or a dash.
_LEAD = re.compile(r"^\s*((?:`[^`]+`|[\w.'/-]+)(?:\s+(?:`[^`]+`|[\w.'/-]+)){0,3})\s*(?:\(|:\s|\s[—–-]\s)")


@dataclass(frozen=True)
class AnswerUnit:
    kind: str
    text: str  # what an answer shows
    context: str = ""  # scored with the text, never shown
    block: int = 0  # units of one list, table or code block share it (order of blocks in the source)
    cells: tuple[tuple[str, str], ...] = ()  # a table row's (header, cell) pairs, in column order

    @property
    def scored_text(self) -> str:
        return f"{self.context} {self.text}".strip() if self.context else self.text

    @property
    def lead(self) -> str:
        """What an entry of a table or list is about: a row's first cell, a line's key, or the few
        words an item opens with before "(", ":" or a dash ("indexer (`services/indexer`) owns
        ..."); empty for a sentence or a code line, and for an item that opens otherwise."""
        if self.kind == TABLE_ROW:
            return self.cells[0][1] if self.cells else ""
        if self.kind not in (LIST_ITEM, KEY_VALUE):
            return ""
        match = _LEAD.match(self.text)
        return match.group(1) if match else ""


def clean_inline(text: str) -> str:
    """One line of answer text: emphasis, links, images and HTML tags removed, entities decoded;
    inline code kept as written when its backticks are balanced, else the stray backticks dropped."""
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _REF_LINK.sub(r"\1", text)
    spans: list[str] = []

    def keep(match: re.Match[str]) -> str:
        spans.append(match.group(2).strip())
        return f"\x00{len(spans) - 1}\x00"

    text = _CODE_SPAN.sub(keep, text)
    for _ in range(2):  # nested ***both***
        text = _STRONG.sub(r"\2", text)
        text = _EMPHASIS.sub(r"\2", text)
    text = _STRIKE.sub(r"\1", text)
    text = html.unescape(_TAG.sub(" ", text).replace("`", ""))
    text = re.sub(r"\x00(\d+)\x00", lambda m: f"`{spans[int(m.group(1))]}`", text)
    return _SPACES.sub(" ", text).strip()


def _has_words(text: str, minimum: int = 1) -> bool:
    return len(_WORDS.findall(text)) >= minimum


def _cells(row: str) -> list[str]:
    row = row.strip()
    if "\t" in row and not row.startswith("|"):
        return [clean_inline(c) for c in row.split("\t")]
    inner = row[1:-1] if row.startswith("|") and row.endswith("|") else row
    return [clean_inline(c) for c in re.split(r"(?<!\\)\|", inner)]


def render_row(headers: list[str], cells: list[str]) -> str:
    """``first cell — Header: value; Header: value``; a two-column row reads ``first: second``."""
    if not cells:
        return ""
    if len(cells) == 2:
        return f"{cells[0]}: {cells[1]}" if cells[1] else cells[0]
    named = [f"{h}: {c}" if h else c for h, c in zip(headers[1:], cells[1:]) if c]
    return f"{cells[0]} — {'; '.join(named)}" if named else cells[0]


class _Reader:
    """Walks a source's lines once, emitting units block by block."""

    def __init__(self, text: str, heading: str) -> None:
        self.lines = without_comments(text.replace("\r\n", "\n")).split("\n")
        self.heading = heading.split(" > ")[-1] if heading else ""
        self.units: list[AnswerUnit] = []
        self.block = 0
        self.lead_in = ""  # the prose line just before a list, table or code block

    def emit(self, kind: str, text: str, context: str = "", cells: tuple[tuple[str, str], ...] = ()) -> None:
        if text and _has_words(text):
            self.units.append(AnswerUnit(kind, text, context.strip(), self.block, cells))

    def context(self, *extra: str) -> str:
        return " ".join(part for part in (self.heading, self.lead_in, *extra) if part)

    def read(self) -> list[AnswerUnit]:
        i = 0
        while i < len(self.lines):
            line = self.lines[i]
            if not line.strip():
                i += 1
                continue
            self.block += 1
            heading = _HEADING.match(line)
            if heading:
                self.heading, self.lead_in = clean_inline(heading.group(2)), ""
                i += 1
            elif _FENCE.match(line):
                i = self._code(i)
            elif _PIPE_ROW.match(line) or ("\t" in line.strip() and not _LIST_ITEM.match(line)):
                i = self._table(i)
            elif _LIST_ITEM.match(line):
                i = self._list(i)
            else:
                i = self._paragraph(i)
        return self.units

    def _code(self, start: int) -> int:
        i = start + 1
        while i < len(self.lines) and not _FENCE.match(self.lines[i]):
            code = self.lines[i].strip()
            if _has_words(code) and len(code) <= 300:
                lead = self.lead_in.rstrip(":").strip()
                shown = f"{lead}: `{code}`" if lead else f"`{code}`"
                self.emit(CODE_LINE, shown, self.heading)
            i += 1
        self.lead_in = ""
        return i + 1

    def _table(self, start: int) -> int:
        rows = []
        i = start
        while i < len(self.lines) and self.lines[i].strip() and (
                _PIPE_ROW.match(self.lines[i]) or "\t" in self.lines[i].strip()):
            rows.append(self.lines[i])
            i += 1
        body = rows
        headers: list[str] = []
        if len(rows) >= 2 and _SEPARATOR_ROW.match(rows[1]):
            headers, body = _cells(rows[0]), rows[2:]
        elif rows and "\t" in rows[0] and not rows[0].lstrip().startswith("|"):
            headers, body = _cells(rows[0]), rows[1:]  # an HTML table: its first row holds the headers
        header_text = " ".join(headers)
        for row in body:
            if _SEPARATOR_ROW.match(row):
                continue
            cells = _cells(row)
            named = tuple((headers[i] if i < len(headers) else "", cell) for i, cell in enumerate(cells))
            self.emit(TABLE_ROW, render_row(headers, cells), self.context(header_text), named)
        self.lead_in = ""
        return i

    def _list(self, start: int) -> int:
        i = start
        items: list[str] = []
        while i < len(self.lines) and self.lines[i].strip():
            line = self.lines[i]
            item = _LIST_ITEM.match(line)
            if item:
                items.append(item.group(2))
            elif _HEADING.match(line) or _FENCE.match(line) or _PIPE_ROW.match(line):
                break
            elif items:
                items[-1] += " " + line.strip()  # a wrapped item
            i += 1
        for item in items:
            self._item(clean_inline(item))
        self.lead_in = ""
        return i

    def _item(self, item: str) -> None:
        if len(_WORDS.findall(item)) <= 40:
            # Under a heading that is data (a changelog's "4.2.0 — 2026-09-14"), the item is
            # only true of it: show it with the heading.
            dated = self.heading and any(ch.isdigit() for ch in self.heading) and not self.lead_in
            self.emit(LIST_ITEM, f"{self.heading}: {item}" if dated else item, self.context())
            return
        for sentence in split_sentences(item):
            self.emit(LIST_ITEM, clean_inline(sentence), self.context())

    def _paragraph(self, start: int) -> int:
        i = start
        lines: list[str] = []
        while i < len(self.lines) and self.lines[i].strip():
            line = self.lines[i]
            if lines and (_HEADING.match(line) or _FENCE.match(line) or _LIST_ITEM.match(line)
                          or _PIPE_ROW.match(line)):
                break
            lines.append(line)
            i += 1
        if len(lines) >= 2 and all(_KEY_VALUE.match(line) for line in lines):
            for line in lines:
                self.emit(KEY_VALUE, clean_inline(line), self.context())
        elif _is_roster(lines):
            # A block of short lines (a plain-text file's list): each line stands alone, and a
            # first line that reads like a title ("Maintainers") is their context.
            title = ""
            if not _KEY_VALUE.match(lines[0]) and len(_WORDS.findall(lines[0])) <= 4 and not lines[0].startswith(" "):
                title, lines = clean_inline(lines[0]), lines[1:]
            for line in lines:
                kind = KEY_VALUE if _KEY_VALUE.match(line) else LIST_ITEM
                self.emit(kind, clean_inline(line), self.context(title))
        else:
            paragraph = "\n".join(lines)
            if len(lines) == 1 and _KEY_VALUE.match(lines[0]) and len(_WORDS.findall(lines[0].split(":")[0])) <= 3 \
                    and not lines[0].rstrip().endswith((".", ":")):
                self.emit(KEY_VALUE, clean_inline(lines[0]), self.context())
            else:
                for sentence in split_sentences(paragraph):
                    self.emit(SENTENCE, clean_inline(sentence), self.heading)
            self.lead_in = clean_inline(lines[-1]) if lines[-1].rstrip().endswith(":") else ""
            return i
        self.lead_in = ""
        return i


def without_comments(text: str) -> str:
    """The text less its HTML comments and leading front matter, each replaced by as many line
    breaks as it held, so the blocks around it stay apart."""
    def blank(match: re.Match[str]) -> str:
        return "\n" * match.group().count("\n")

    return _COMMENT.sub(blank, _FRONT_MATTER.sub(blank, text))


def _is_roster(lines: list[str]) -> bool:
    """Three or more short lines none of which ends a sentence: one fact per line."""
    if len(lines) < 3:
        return False
    return all(len(_WORDS.findall(line)) <= 12 and not line.rstrip().endswith((".", "!", "?", ",", ";"))
               for line in lines)


def split_units(text: str, heading: str = "") -> list[AnswerUnit]:
    """The answer units of one source text, in source order. ``heading`` is the source's heading
    path (``A > B``); headings inside the text take over from it as they come."""
    return _Reader(text, heading).read()
