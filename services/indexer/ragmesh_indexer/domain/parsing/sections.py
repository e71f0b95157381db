"""Groups a parser's blocks into sections, tracking the heading path and de-duplicated anchors."""

from __future__ import annotations

from ..model import Block, Section
from ..urls import SlugRegistry


class SectionBuilder:
    """Feed blocks in document order; a heading closes the current section and opens the next."""

    def __init__(self) -> None:
        self._slugs = SlugRegistry()
        self._stack: list[tuple[int, str]] = []  # (level, heading text) of the open headings
        self._sections: list[Section] = []
        self._blocks: list[Block] = []
        self._path: list[str] = []
        self._anchor = ""
        self._level = 0
        self._page = 0

    def heading(self, level: int, text: str, block: Block, explicit_anchor: str = "") -> None:
        self._flush()
        while self._stack and self._stack[-1][0] >= level:
            self._stack.pop()
        self._stack.append((level, text))
        self._path = [t for _, t in self._stack]
        self._anchor = self._slugs.claim_slug(explicit_anchor) if explicit_anchor else self._slugs.claim(text)
        self._level = level
        self._blocks = [block]

    def page(self, number: int, heading_path: list[str]) -> None:
        """PDF pages are sections of their own: a chunk never spans two pages."""
        self._flush()
        self._path = heading_path
        self._anchor = f"page={number}"
        self._level = 0
        self._page = number

    def add(self, block: Block) -> None:
        self._blocks.append(block)

    def finish(self) -> list[Section]:
        self._flush()
        return self._sections

    def _flush(self) -> None:
        if self._blocks:
            self._sections.append(
                Section(
                    heading_path=list(self._path),
                    anchor=self._anchor,
                    level=self._level,
                    blocks=self._blocks,
                    page=self._page,
                )
            )
        self._blocks = []
