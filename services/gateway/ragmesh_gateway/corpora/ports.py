"""The catalogue of corpora and index-wide numbers, as retrieval reports them."""

from __future__ import annotations

import abc
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CorpusInfo:
    corpus: str
    library: str
    version: str
    visibility: str = "public"
    active_index_version: str = ""
    points: int = 0
    documents: int = 0
    state: str = "empty"  # "active" or "empty"
    license: str = ""
    source_url: str = ""


@dataclass(frozen=True, slots=True)
class IndexStats:
    corpora: int = 0
    points: int = 0
    documents: int = 0
    embedding_model: str = ""
    vector_size: int = 0
    lexical_tokenizer: str = ""
    store: str = ""


class CorpusCatalog(abc.ABC):
    @abc.abstractmethod
    async def list_corpora(self, readable_corpora: tuple[str, ...]) -> list[CorpusInfo]: ...

    @abc.abstractmethod
    async def stats(self, readable_corpora: tuple[str, ...]) -> IndexStats: ...


class CorpusDirectory(abc.ABC):
    """Every corpus id the gateway serves, whoever asks: the set that ACLs are cut from.

    Retrieval lists only corpora the caller names, so the gateway has to know the ids up front.
    """

    @abc.abstractmethod
    async def corpus_ids(self) -> frozenset[str]: ...


class ConfiguredCorpusDirectory(CorpusDirectory):
    """Corpus ids from RAGMESH_CORPORA (plus those with a file root in RAGMESH_CORPUS_ROOTS)."""

    def __init__(self, corpus_ids: list[str] | set[str] | frozenset[str]) -> None:
        self._ids = frozenset(corpus_ids)

    async def corpus_ids(self) -> frozenset[str]:
        return self._ids
