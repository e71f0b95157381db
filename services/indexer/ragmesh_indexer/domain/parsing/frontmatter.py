"""YAML frontmatter: title, tags, ``index: false``; broken YAML is reported, never fatal."""

from __future__ import annotations

import re
from typing import Any

import msgspec
import yaml

# Looked for in frontmatter that fails to parse: an author who wrote ``index: false`` meant it even
# if another line has a typo, so that file is archived rather than published.
_INDEX_FALSE_LINE = re.compile(r"^\s*index\s*:\s*['\"]?(false|no|off|0)['\"]?\s*(#.*)?$", re.I | re.M)
_KEY_LINE = re.compile(r"^[A-Za-z_][\w-]*\s*:")
_FALSE_WORDS = frozenset({"false", "no", "off", "0"})


class Frontmatter(msgspec.Struct):
    title: str = ""
    tags: list[str] = []
    index: bool = True
    metadata: dict[str, Any] = {}
    broken: bool = False
    detail: str = ""


def read_frontmatter(raw: str) -> Frontmatter:
    try:
        data = yaml.safe_load(raw) if raw.strip() else {}
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        detail = f"YAML error at frontmatter line {where.line + 1}" if where else "YAML error"
        return broken_frontmatter(raw, detail)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        return broken_frontmatter(raw, "frontmatter is not a mapping")
    metadata = msgspec.to_builtins(data, str_keys=True, enc_hook=str)
    return Frontmatter(
        title=_text(data.get("title")),
        tags=_tags(data.get("tags")),
        index=_indexable(data.get("index", True)),
        metadata=metadata,
    )


def broken_frontmatter(raw: str, detail: str) -> Frontmatter:
    return Frontmatter(index=not _INDEX_FALSE_LINE.search(raw), broken=True, detail=detail)


def looks_like_unclosed_frontmatter(lines: list[str]) -> bool:
    """A file opening with ``---`` then ``key:`` lines and no closing fence: the plugin reads it
    as a rule and a paragraph, but the author meant frontmatter."""
    return len(lines) > 1 and lines[0].rstrip() == "---" and bool(_KEY_LINE.match(lines[1]))


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _tags(value: Any) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else [value]
    return [str(t).strip() for t in items if t is not None and str(t).strip()]


def _indexable(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value != 0
    return str(value).strip().lower() not in _FALSE_WORDS
