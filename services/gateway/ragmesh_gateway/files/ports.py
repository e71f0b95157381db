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
