"""Citation URLs: configurable base + path slug + GitHub-style heading anchor."""

from __future__ import annotations

import enum
import posixpath
import unicodedata
from urllib.parse import quote

import msgspec


class PathStyle(enum.StrEnum):
    DROP_EXTENSION = "drop-extension"  # guide/intro.md -> guide/intro
    HTML = "html"  # guide/intro.md -> guide/intro.html
    DIRECTORY = "directory"  # guide/intro.md -> guide/intro/ ; guide/index.md -> guide/
    KEEP = "keep"  # guide/intro.md -> guide/intro.md


_INDEX_STEMS = frozenset({"index", "readme", "_index"})


class UrlScheme(msgspec.Struct, frozen=True):
    base: str = ""
    path_style: PathStyle = PathStyle.DROP_EXTENSION

    def document_url(self, path: str) -> str:
        return self._join(_path_slug(path, self.path_style))

    def anchor_url(self, path: str, anchor: str) -> str:
        """Path and anchor are percent-encoded (UTF-8), so CJK slugs give a valid URI."""
        url = self.document_url(path)
        return f"{url}#{quote(anchor, safe='=')}" if anchor else url

    def _join(self, slug: str) -> str:
        encoded = quote(slug, safe="/")
        if not self.base:
            return encoded
        return f"{self.base.rstrip('/')}/{encoded}"


def _path_slug(path: str, style: PathStyle) -> str:
    if style == PathStyle.KEEP:
        return path
    stem, ext = posixpath.splitext(path)
    # PDFs are served as themselves whatever the page style; dropping ".pdf" gives a dead link.
    if ext.lower() == ".pdf":
        return path
    if style == PathStyle.HTML:
        return f"{stem}.html"
    if style == PathStyle.DIRECTORY:
        head, name = posixpath.split(stem)
        if name.lower() in _INDEX_STEMS:
            return f"{head}/" if head else ""
        return f"{stem}/"
    return stem


def github_slug(text: str) -> str:
    """The anchor GitHub gives a heading: lower-case, punctuation and symbols dropped, each space
    a hyphen; letters, digits and marks of every script (CJK included) kept, as are - and _."""
    out: list[str] = []
    for ch in text.strip().lower():
        if ch == " ":
            out.append("-")
        elif ch in "-_" or unicodedata.category(ch)[0] in "LNM":
            out.append(ch)
    return "".join(out)


class SlugRegistry:
    """De-duplicates anchors within one document the way GitHub does: intro, intro-1, intro-2."""

    def __init__(self) -> None:
        self._seen: dict[str, int] = {}

    def claim(self, text: str) -> str:
        return self.claim_slug(github_slug(text))

    def claim_slug(self, slug: str) -> str:
        candidate = slug
        while candidate in self._seen:
            self._seen[slug] += 1
            candidate = f"{slug}-{self._seen[slug]}"
        self._seen[candidate] = 0
        return candidate
