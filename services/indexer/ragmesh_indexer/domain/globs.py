"""Include/exclude patterns over relative POSIX paths.

``*`` and ``?`` stay inside one path segment, ``**`` spans segments (``**/`` may match none), and
``[abc]``/``[!abc]`` are classes. As in .gitignore, a pattern without ``/`` matches at any depth
(``*.md`` selects every Markdown file), and a pattern that matches a directory selects everything
below it (``drafts`` or ``build/**`` exclude the whole folder).
"""

from __future__ import annotations

import re
from collections.abc import Iterable


def _translate(pattern: str) -> re.Pattern[str]:
    pattern = pattern.strip().strip("/")
    if "/" not in pattern and not pattern.startswith("**"):
        pattern = f"**/{pattern}"
    out: list[str] = []
    i = 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and (close := pattern.find("]", i + 2)) != -1:
            body = pattern[i + 1 : close]
            negate = body.startswith("!")
            body = body[1:] if negate else body
            out.append(f"[{'^' if negate else ''}{re.escape(body).replace(chr(92) + '-', '-')}]")
            i = close + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


class PathFilter:
    def __init__(self, include: Iterable[str], exclude: Iterable[str]) -> None:
        self._include = [_translate(p) for p in include if p.strip()] or [_translate("**")]
        self._exclude = [_translate(p) for p in exclude if p.strip()]

    def wants(self, path: str) -> bool:
        return _any_match(self._include, path) and not _any_match(self._exclude, path)

    def prunes(self, directory: str) -> bool:
        """A directory that an exclude pattern selects is not walked at all."""
        return any(p.match(directory) for p in self._exclude)


def _any_match(patterns: list[re.Pattern[str]], path: str) -> bool:
    parts = path.split("/")
    candidates = ["/".join(parts[: n + 1]) for n in range(len(parts))]
    return any(p.match(c) for p in patterns for c in candidates)
