"""Serve a corpus's original files without ever leaving its root folder.

A request names a corpus and a path relative to its root. The path is refused unless every part
is an ordinary name (no "..", ".", empty part, hidden name, backslash or NUL), and the fully
resolved file (symlinks followed) must still lie inside the resolved root. Only files the corpus's
active index was built from are served: retrieval is asked whether any chunk came from the path.
Every refusal, unreadable corpus, unindexed and missing file gives the same NOT_FOUND, so probing
learns nothing.
"""

from __future__ import annotations

import asyncio
import mimetypes
from dataclasses import dataclass
from pathlib import Path

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.files.ports import CorpusRoots, IndexedSources

MAX_PATH_CHARS = 1024

# Types mimetypes does not know everywhere; documentation sources are mostly these.
_MEDIA_TYPES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".mdx": "text/markdown",
    ".rst": "text/x-rst",
    ".txt": "text/plain",
    ".adoc": "text/asciidoc",
    ".ipynb": "application/x-ipynb+json",
    ".toml": "application/toml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
    ".pdf": "application/pdf",
    ".html": "text/html",
    ".htm": "text/html",
    ".json": "application/json",
}


def not_found() -> RagmeshError:
    return RagmeshError(ErrorCode.NOT_FOUND, "file not found")


@dataclass(frozen=True, slots=True)
class CorpusFile:
    path: Path
    filename: str
    media_type: str


def media_type_of(name: str) -> str:
    """The file's media type; the HTTP layer adds ``charset=utf-8`` to text/* types."""
    suffix = Path(name).suffix.lower()
    return _MEDIA_TYPES.get(suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"


def safe_parts(relative: str) -> list[str]:
    """The path's parts, or NOT_FOUND when any part could step outside or hide something."""
    if not relative or len(relative) > MAX_PATH_CHARS or "\x00" in relative or "\\" in relative:
        raise not_found()
    parts = relative.split("/")
    for part in parts:
        if part in ("", ".", "..") or part.startswith(".") or ":" in part:
            raise not_found()
    return parts


def _resolve_inside(root: Path, parts: list[str]) -> Path:
    try:
        real_root = root.resolve(strict=True)
        target = real_root.joinpath(*parts).resolve(strict=True)
    except (OSError, RuntimeError):  # missing, unreadable, or a symlink loop
        raise not_found() from None
    if not target.is_relative_to(real_root) or not target.is_file():
        raise not_found()
    return target


class FileService:
    def __init__(self, roots: CorpusRoots, sources: IndexedSources) -> None:
        self._roots = roots
        self._sources = sources

    async def served_corpora(self, caller: Caller) -> list[str]:
        """The corpora the caller may read whose files can be served (their root folder is known)."""
        return [c for c in caller.readable_list() if await self._roots.root_of(c) is not None]

    async def locate(self, corpus: str, relative: str, caller: Caller) -> CorpusFile:
        if not caller.can_read(corpus):
            raise not_found()
        root = await self._roots.root_of(corpus)
        if root is None:
            raise not_found()
        parts = safe_parts(relative)
        # Asked only about a corpus the caller reads, so the answer cannot leak another one.
        if not await self._sources.has_source(corpus, "/".join(parts), (corpus,)):
            raise not_found()
        target = await asyncio.to_thread(_resolve_inside, root, parts)
        return CorpusFile(path=target, filename=parts[-1], media_type=media_type_of(parts[-1]))
