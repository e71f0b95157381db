"""HTML via BeautifulSoup (html.parser, which records each tag's source line and column).

The document text is the extracted text of the page's main content, block by block. A block's
lines run from its start tag to its end tag (or, where the end tag is implied, to the last
non-blank character before the next element outside it), so the extracted text always lies within
them; the quote gate strips tags to check.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from bs4 import BeautifulSoup, NavigableString, Tag
from bs4.element import PreformattedString

from ..model import Block, ParsedDocument
from ..text import LineIndex, collapse_whitespace
from .sections import SectionBuilder

_SKIP = frozenset(
    {"script", "style", "noscript", "template", "nav", "footer", "aside", "svg", "head", "form",
     "button", "iframe", "object", "select"}
)
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
_BLOCKS = {
    "p": "paragraph", "pre": "code", "table": "table", "ul": "list", "ol": "list", "dl": "list",
    "li": "list", "blockquote": "quote", "figcaption": "paragraph", "address": "paragraph",
}
_INLINE = frozenset(
    {"a", "abbr", "b", "bdi", "bdo", "br", "cite", "code", "data", "dfn", "em", "i", "img", "kbd",
     "mark", "q", "s", "samp", "small", "span", "strong", "sub", "sup", "time", "u", "var", "wbr",
     "del", "ins", "label"}
)

Item = tuple[str, list[Tag | NavigableString]]


def parse_html(path: str, text: str) -> ParsedDocument:
    soup = BeautifulSoup(text, "html.parser")
    positions = _SourcePositions(soup, text)
    root = soup.find("main") or soup.find("article") or soup.body or soup
    builder = SectionBuilder()
    out = _TextSink()
    first_h1 = ""
    for kind, nodes in _walk(root):
        content = _node_text(kind, nodes)
        if not content:
            continue
        start, end = out.add(content)
        line_start, line_end = positions.lines(nodes)
        block_kind = "heading" if kind in _HEADINGS else kind
        block = Block(kind=block_kind, start=start, end=end, line_start=line_start, line_end=line_end)
        if kind in _HEADINGS:
            tag = nodes[0]
            assert isinstance(tag, Tag)
            if kind == "h1" and not first_h1:
                first_h1 = content
            builder.heading(int(kind[1]), content, block, explicit_anchor=str(tag.get("id") or ""))
        else:
            builder.add(block)
    page_title = collapse_whitespace(soup.title.get_text()) if soup.title else ""
    return ParsedDocument(
        path=path,
        parser="html",
        title=page_title or first_h1 or posixpath.splitext(posixpath.basename(path))[0],
        text=out.text,
        sections=builder.finish(),
        verbatim=False,
    )


def _walk(root: Tag) -> Iterator[Item]:
    """Yield (kind, nodes) in document order: headings, block elements, and runs of loose inline
    content (text sitting directly in a div) so no visible text is lost. Iterative, because
    generated pages can nest deeper than Python's recursion limit."""
    stack = [iter(root.children)]
    loose: list[Tag | NavigableString] = []
    while stack:
        child = next(stack[-1], None)
        if child is None:  # leaving a container ends its run of loose text
            stack.pop()
            if loose:
                yield "paragraph", loose
                loose = []
            continue
        if isinstance(child, PreformattedString):  # comments, doctype, CDATA
            continue
        if isinstance(child, NavigableString) or (isinstance(child, Tag) and child.name in _INLINE):
            loose.append(child)
            continue
        if not isinstance(child, Tag) or child.name in _SKIP:
            continue
        if loose:
            yield "paragraph", loose
            loose = []
        if child.name in _HEADINGS:
            yield child.name, [child]
        elif child.name in _BLOCKS:
            yield _BLOCKS[child.name], [child]
        else:
            stack.append(iter(child.children))


def _node_text(kind: str, nodes: list[Tag | NavigableString]) -> str:
    if kind == "code":
        return nodes[0].get_text().strip("\n").rstrip()
    if kind == "table":
        # Cells are tab-separated: readers of the chunk (the extractive answerer's table rows)
        # need the cell boundaries, and a tab is white space to the quote gate.
        rows = [
            "\t".join(collapse_whitespace(c.get_text()) for c in row.find_all(["td", "th"]))
            for row in nodes[0].find_all("tr")
        ]
        return "\n".join(r for r in rows if r) or collapse_whitespace(nodes[0].get_text())
    if kind == "list" and nodes[0].name in ("ul", "ol", "dl"):
        items = [collapse_whitespace(i.get_text()) for i in nodes[0].find_all(["li", "dt", "dd"], recursive=False)]
        return "\n".join(i for i in items if i) or collapse_whitespace(nodes[0].get_text())
    return collapse_whitespace("".join(n.get_text() if isinstance(n, Tag) else str(n) for n in nodes))


class _TextSink:
    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0

    def add(self, content: str) -> tuple[int, int]:
        if self._parts:
            self._parts.append("\n\n")
            self._length += 2
        start = self._length
        self._parts.append(content)
        self._length += len(content)
        return start, self._length

    @property
    def text(self) -> str:
        return "".join(self._parts)


class _SourcePositions:
    """Source offsets of tags; the end of an element is bounded by the next element after it."""

    def __init__(self, soup: BeautifulSoup, text: str) -> None:
        self._text = text
        self._lines = LineIndex(text)
        self._tags = soup.find_all(True)
        self._order = {id(tag): i for i, tag in enumerate(self._tags)}

    def lines(self, nodes: list[Tag | NavigableString]) -> tuple[int, int]:
        start = self._start(nodes[0])
        end = self._end(nodes[-1])
        while end > start and self._text[end - 1].isspace():
            end -= 1
        return self._lines.lines_of(start, max(end, start + 1))

    def _offset(self, tag: Tag) -> int:
        if tag.sourceline is None:
            return 0
        return self._lines.offset_of(tag.sourceline, tag.sourcepos or 0)

    def _start(self, node: Tag | NavigableString) -> int:
        if isinstance(node, Tag):
            return self._offset(node)
        previous = node.previous_element
        while previous is not None and not isinstance(previous, Tag):
            previous = previous.previous_element
        return self._offset(previous) if previous is not None else 0

    def _end(self, node: Tag | NavigableString) -> int:
        if isinstance(node, Tag):
            after = self._order[id(node)] + 1 + len(node.find_all(True))
            bound = self._offset(self._tags[after]) if after < len(self._tags) else len(self._text)
            # The element's own end tag, when written, ends it before any comment or stray text.
            close = self._text.rfind(f"</{node.name}", self._offset(node), bound)
            return close + len(node.name) + 2 if close != -1 else bound
        following = node.next_element
        while following is not None and not isinstance(following, Tag):
            following = following.next_element
        return self._offset(following) if following is not None else len(self._text)
