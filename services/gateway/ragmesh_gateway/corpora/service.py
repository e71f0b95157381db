"""Corpus listing and index statistics, filtered to what the caller may read."""

from __future__ import annotations

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.catalog import CorpusCatalog, CorpusInfo, IndexStats


class CorpusService:
    def __init__(self, catalog: CorpusCatalog) -> None:
        self._catalog = catalog

    async def list_corpora(self, caller: Caller) -> list[CorpusInfo]:
        if caller.reads_nothing:
            return []
        corpora = await self._catalog.list_corpora(tuple(caller.readable_list()))
        # Retrieval filters by the ACL already; filtering again keeps a misconfigured backend from leaking.
        return sorted((c for c in corpora if caller.can_read(c.corpus)), key=lambda c: c.corpus)

    async def stats(self, caller: Caller) -> IndexStats:
        if caller.reads_nothing:
            return IndexStats()
        return await self._catalog.stats(tuple(caller.readable_list()))
