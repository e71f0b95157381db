"""The catalogue of corpora and index-wide numbers, as retrieval reports them."""

from __future__ import annotations

import abc
import asyncio
import time
from collections.abc import Callable
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
        self._clock = clock
        self._configured = frozenset(configured)
        self._ttl_s = ttl_s
        self._known: dict[str, CorpusInfo] = {}
        self._fetched_at = float("-inf")
        self._refreshing = asyncio.Lock()
        self._background: asyncio.Task[None] | None = None

    def _age(self) -> float:
        return self._clock() - self._fetched_at

    async def _refresh(self) -> None:
        age = self._age()
        if age < self._ttl_s * self.REFRESH_AHEAD:
            return
        if age < self._ttl_s:
            if self._background is None or self._background.done():
                self._background = asyncio.create_task(self._refresh_once())
            return
        await self._refresh_once()

    async def _refresh_once(self) -> None:
        async with self._refreshing:
            # Refreshed by the request this one waited for, or by a background refresh meanwhile.
            if self._age() >= self._ttl_s * self.REFRESH_AHEAD:
                await self._fetch()

    async def _fetch(self) -> None:
        from ragmesh_common.errors import RagmeshError

        now = self._clock()
        try:
            self._known = {c.corpus: c for c in await self._lister.list_all_corpora()}
            self._fetched_at = now
        except RagmeshError:
            self._fetched_at = now - self._ttl_s / 2  # retry soon, keep what we knew

    async def corpus_ids(self) -> frozenset[str]:
        await self._refresh()
        return self._configured | frozenset(self._known)

    async def root_of(self, corpus: str) -> str:
        await self._refresh()
        info = self._known.get(corpus)
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
