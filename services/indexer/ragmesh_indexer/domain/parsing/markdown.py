"""Markdown via markdown-it-py: top-level block tokens carry exact line maps.

Every block is a span of the (CR-stripped, NFC) file itself, so chunk quotes are verbatim. Only
top-level tokens become blocks: a list or blockquote stays one block with its nested content.
"""

from __future__ import annotations

import posixpath

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from ..model import Block, FileWarning, ParsedDocument
from ..text import LineIndex, trim_span
from .frontmatter import Frontmatter, broken_frontmatter, looks_like_unclosed_frontmatter, read_frontmatter
from .sections import SectionBuilder

_BLOCK_KINDS = {
    "heading_open": "heading",
    "paragraph_open": "paragraph",
    "fence": "code",
    "code_block": "code",
    "table_open": "table",
    "bullet_list_open": "list",
    "ordered_list_open": "list",
    "blockquote_open": "quote",
    "html_block": "html",
}

# The parser keeps no state between calls, so one shared instance serves every thread.
_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"]).use(front_matter_plugin)


def parse_markdown(path: str, text: str) -> ParsedDocument:
    tokens = _MARKDOWN.parse(text)
    lines = LineIndex(text)
    front = _frontmatter(tokens, text)
    body_from_line = 1
    if tokens and tokens[0].type == "front_matter" and tokens[0].map:
        body_from_line = tokens[0].map[1] + 1

    builder = SectionBuilder()
    first_h1 = ""
    for i, token in enumerate(tokens):
        kind = _BLOCK_KINDS.get(token.type)
        if kind is None or token.level != 0 or not token.map:
            continue
        first_line = token.map[0] + 1
        if first_line < body_from_line:
            continue
        last_line = max(first_line, token.map[1])
        start, end = trim_span(text, lines.offset_of(first_line), lines.line_span(last_line)[1])
        if end <= start:
            continue
        line_start, line_end = lines.lines_of(start, end)
        block = Block(kind=kind, start=start, end=end, line_start=line_start, line_end=line_end)
        if kind == "heading":
            heading = _plain_text(tokens[i + 1]) if i + 1 < len(tokens) else ""
            level = int(token.tag[1:]) if token.tag[1:].isdigit() else 1
            if level == 1 and not first_h1:
                first_h1 = heading
            builder.heading(level, heading, block)
        else:
            builder.add(block)

    return ParsedDocument(
        path=path,
        parser="markdown",
        title=front.title or first_h1 or _stem(path),
        text=text,
        sections=builder.finish(),
        tags=front.tags,
        metadata=front.metadata,
        warnings=[f"{FileWarning.BROKEN_FRONTMATTER}: {front.detail}"] if front.broken else [],
        index=front.index,
    )


def _frontmatter(tokens: list[Token], text: str) -> Frontmatter:
    if tokens and tokens[0].type == "front_matter":
        return read_frontmatter(tokens[0].content)
    head = text.split("\n", 40)
    if looks_like_unclosed_frontmatter(head):
        return broken_frontmatter("\n".join(head[1:40]), "frontmatter is not closed by ---")
    return Frontmatter()


def _plain_text(inline: Token) -> str:
    """A heading's visible text: what GitHub slugs and what a reader sees in a breadcrumb."""
    parts: list[str] = []

    def walk(children: list[Token]) -> None:
        for child in children:
            if child.type in ("text", "code_inline"):
                parts.append(child.content)
            elif child.type in ("softbreak", "hardbreak"):
                parts.append(" ")
            elif child.children:
                walk(child.children)

    walk(inline.children or [])
    return " ".join("".join(parts).split())


def _stem(path: str) -> str:
    return posixpath.splitext(posixpath.basename(path))[0]
