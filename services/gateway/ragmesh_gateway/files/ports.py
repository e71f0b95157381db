"""Where each corpus keeps its original files."""

from __future__ import annotations

import abc
from pathlib import Path


class CorpusRoots(abc.ABC):
    @abc.abstractmethod
    async def root_of(self, corpus: str) -> Path | None:
        """The corpus's root folder, or None when the gateway does not serve its files."""


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
