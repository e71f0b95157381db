"""The catalogue of corpora and index-wide numbers, as retrieval reports them."""

from __future__ import annotations

import abc
import time
from collections.abc import Callable
from dataclasses import dataclass

from ragmesh_common.errors import RagmeshError
from ragmesh_common.expiring import Expiring


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
    root: str = ""  # the folder the indexer read; internal, never sent to clients
    embedder: str = ""  # the embedder that built the active index (its identity, one line)
    search: str = ""  # hybrid, keyword_only, unknown ("" from a retrieval that does not say)
    keyword_only_reason: str = ""


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
    """Every corpus id the gateway serves, whoever asks: the set that ACLs are cut from."""

    @abc.abstractmethod
    async def corpus_ids(self) -> frozenset[str]: ...

    async def root_of(self, corpus: str) -> str:
        """The corpus folder as the indexer recorded it ("" when unknown)."""
        return ""


class DiscoveredCorpusDirectory(CorpusDirectory):
    """Corpora with an active index, as retrieval reports them, plus any configured ids.

    Cached for ``ttl_s``; a newly promoted corpus shows up within that time. One request at a time
    refreshes an expired list, and those arriving meanwhile wait for its answer: a burst of requests
    asks retrieval once, not once each. Under steady traffic no request waits at all: the first one
    that finds the list in the last quarter of its TTL starts a refresh in the background and is
    answered from the list it found. When retrieval cannot be reached the last known list (or the
    configured one) keeps serving: ACLs only ever shrink to what is known.
    """

    REFRESH_AHEAD = 0.75  # share of the TTL after which a request starts a background refresh

    def __init__(self, lister: "AllCorporaLister", configured: frozenset[str] = frozenset(),
                 *, ttl_s: float = 2.0, clock: Callable[[], float] = time.monotonic) -> None:
        self._lister = lister
        self._configured = frozenset(configured)
        self._known = Expiring(self._list, ttl_s=ttl_s, clock=clock, refresh_ahead=self.REFRESH_AHEAD,
                               keep_on=(RagmeshError,), initial={})

    async def _list(self) -> dict[str, CorpusInfo]:
        return {c.corpus: c for c in await self._lister.list_all_corpora()}

    async def corpus_ids(self) -> frozenset[str]:
        return self._configured | frozenset(await self._known.get())

    async def root_of(self, corpus: str) -> str:
        info = (await self._known.get()).get(corpus)
        return info.root if info else ""


class AllCorporaLister(abc.ABC):
    @abc.abstractmethod
    async def list_all_corpora(self) -> list[CorpusInfo]:
        """Every corpus with an active index, with visibility and root (gateway-internal)."""


class ConfiguredCorpusDirectory(CorpusDirectory):
    """Corpus ids from RAGMESH_CORPORA (plus those with a file root in RAGMESH_CORPUS_ROOTS)."""

    def __init__(self, corpus_ids: list[str] | set[str] | frozenset[str]) -> None:
        self._ids = frozenset(corpus_ids)

    async def corpus_ids(self) -> frozenset[str]:
        return self._ids
