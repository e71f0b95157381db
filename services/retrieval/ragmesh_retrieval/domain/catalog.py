"""Which corpora are searchable right now: every alias ``rm__<corpus>`` and the collection it serves.

Read from the store and kept for a short TTL so that a search does not list aliases each time. The
VectorStore servicer invalidates it on every alias or collection change made through this process
(the embedded default); against a Qdrant server the indexer swaps aliases directly and the TTL bounds
how long an old index version keeps serving.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Iterable

import msgspec

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.expiring import Expiring
from ragmesh_common.index_schema import PREFIX, CollectionMeta, alias_name, index_version_of
from ragmesh_common.vectorstore.port import VectorStorePort

log = logging.getLogger("ragmesh.retrieval.catalog")


class ActiveCorpus(msgspec.Struct, frozen=True):
    corpus: str
    alias: str
    collection: str
    index_version: str
    meta: CollectionMeta

    @property
    def library(self) -> str:
        return self.meta.corpus.library

    @property
    def version(self) -> str:
        return self.meta.corpus.version


class CorpusCatalog:
    def __init__(
        self,
        store: VectorStorePort,
        *,
        ttl_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        on_refresh: Callable[[dict[str, ActiveCorpus]], None] | None = None,
    ) -> None:
        self.store = store
        self.on_refresh = on_refresh
        self._active = Expiring(self._load, ttl_s=ttl_s, clock=clock)

    def invalidate(self) -> None:
        self._active.invalidate()

    async def active(self) -> dict[str, ActiveCorpus]:
        """corpus id -> its active index, for every corpus whose alias serves a ragmesh collection."""
        return await self._active.get()

    async def readable(self, readable_corpora: Iterable[str]) -> list[ActiveCorpus]:
        """Active corpora the caller may read, sorted by corpus id."""
        allowed = set(readable_corpora)
        active = await self.active()
        return [active[c] for c in sorted(active) if c in allowed]

    async def _load(self) -> dict[str, ActiveCorpus]:
        aliases = {a: c for a, c in (await self.store.get_aliases()).items() if a.startswith(f"{PREFIX}__")}
        infos = await asyncio.gather(*(self.store.get_collection(c) for c in aliases.values()),
                                     return_exceptions=True)
        active: dict[str, ActiveCorpus] = {}
        for (alias, collection), info in zip(aliases.items(), infos):
            if isinstance(info, RagmeshError) and info.code == ErrorCode.NOT_FOUND:
                continue  # dropped between the two calls
            if isinstance(info, BaseException):
                raise info
            meta = info.metadata
            if meta is None or alias != alias_name(meta.corpus.corpus):
                log.warning("alias skipped: collection has no ragmesh metadata",
                            extra={"fields": {"alias": alias, "collection": collection}})
                continue
            corpus = meta.corpus.corpus
            active[corpus] = ActiveCorpus(
                corpus=corpus, alias=alias, collection=collection,
                index_version=index_version_of(collection), meta=meta,
            )
        if self.on_refresh is not None:
            self.on_refresh(active)
        return active
