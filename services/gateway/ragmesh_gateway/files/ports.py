"""Where each corpus keeps its original files."""

from __future__ import annotations

import abc
from pathlib import Path


class CorpusRoots(abc.ABC):
    @abc.abstractmethod
    async def root_of(self, corpus: str) -> Path | None:
        """The corpus's root folder, or None when the gateway does not serve its files."""


class IndexedSources(abc.ABC):
    """Which source files a corpus's active index holds: only those are served, so a file the
    indexer skipped (excluded by globs, ``index: false``, dot-files) is as absent as a missing one."""

    @abc.abstractmethod
    async def has_source(self, corpus: str, source_path: str, readable_corpora: tuple[str, ...]) -> bool:
        """True when a chunk of ``corpus``'s active index came from ``source_path``."""


class NothingIndexed(IndexedSources):
    """Default deny: with no index to ask, no file is served."""

    async def has_source(self, corpus: str, source_path: str, readable_corpora: tuple[str, ...]) -> bool:
        return False


class ConfiguredCorpusRoots(CorpusRoots):
    """Roots from RAGMESH_CORPUS_ROOTS (``corpus=/path,...``)."""

    def __init__(self, roots: dict[str, str]) -> None:
        self._roots = {corpus: Path(folder) for corpus, folder in roots.items()}

    async def root_of(self, corpus: str) -> Path | None:
        return self._roots.get(corpus)


class IndexedCorpusRoots(CorpusRoots):
    """Configured roots first (a deployment may mount files elsewhere), then the folder the indexer
    recorded for the corpus's active index."""

    def __init__(self, configured: ConfiguredCorpusRoots, directory) -> None:  # CorpusDirectory
        self._configured = configured
        self._directory = directory

    async def root_of(self, corpus: str) -> Path | None:
        root = await self._configured.root_of(corpus)
        if root is not None:
            return root
        recorded = await self._directory.root_of(corpus)
        return Path(recorded) if recorded else None
