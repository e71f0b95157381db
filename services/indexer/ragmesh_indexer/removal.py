"""Removing a corpus (``ragmesh corpus remove``): a corpus indexed by mistake leaves every search.

The order follows promotion's: the registry first (every version retired, the corpus marked removed,
one transaction), then the alias (the corpus stops serving), then the collections. A process killed
in between leaves a removed corpus whose alias or collections remain; :meth:`CorpusRemover.sweep`
deletes them at start-up, so a removal once committed always completes. The versions' manifests
stay (manifests.py: they outlive retirement and are the record of what was indexed).

An alias is deleted only while it points at one of the corpus's own collections: two corpus ids can
share an alias slug (``Docs@1`` and ``docs-1``), and removing one must never unserve the other.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ragmesh_common.index_schema import alias_name
from ragmesh_common.vectorstore.port import VectorStorePort
from ragmesh_indexer.checkpoints import Checkpoint, no_checkpoint
from ragmesh_indexer.registry import IndexRegistry, IndexVersion

log = logging.getLogger("ragmesh.indexer.removal")


@dataclass(frozen=True, slots=True)
class RemovedVersion:
    index_version: str
    state: str  # before the removal
    collection: str
    chunks: int
    collection_exists: bool


@dataclass(frozen=True, slots=True)
class Removal:
    corpus: str
    dry_run: bool
    alias: str
    alias_existed: bool
    versions: list[RemovedVersion] = field(default_factory=list)
    collections_deleted: list[str] = field(default_factory=list)


class CorpusRemover:
    def __init__(self, registry: IndexRegistry, store: VectorStorePort, *,
                 checkpoint: Checkpoint = no_checkpoint) -> None:
        self.registry = registry
        self.store = store
        self.checkpoint = checkpoint

    async def remove(self, corpus: str, *, actor: str, reason: str, dry_run: bool) -> Removal:
        """What goes (``dry_run``: nothing changes), or remove it. NOT_FOUND for an unknown corpus."""
        await self.registry.get_corpus(corpus)
        versions = await self.registry.list_versions(corpus)
        collections = set(await self.store.list_collections())
        alias = alias_name(corpus)
        alias_existed = await self._own_alias(alias, versions)
        planned = [RemovedVersion(index_version=v.index_version, state=v.state.value, collection=v.collection,
                                  chunks=v.stats.chunks, collection_exists=v.collection in collections)
                   for v in versions]
        if dry_run:
            return Removal(corpus=corpus, dry_run=True, alias=alias, alias_existed=alias_existed, versions=planned)
        await self.registry.remove_corpus(corpus, actor=actor, reason=reason)
        await self.checkpoint("remove-committed")
        deleted = await self._delete(corpus, versions, collections)
        log.warning("corpus removed", extra={"fields": {"corpus": corpus, "actor": actor, "reason": reason,
                                                          "collections": deleted}})
        return Removal(corpus=corpus, dry_run=False, alias=alias, alias_existed=alias_existed, versions=planned,
                       collections_deleted=deleted)

    async def sweep(self) -> None:
        """Start-up repair: finish removals a dead process committed but did not complete."""
        collections = set(await self.store.list_collections())
        for corpus in await self.registry.removed_corpora():
            deleted = await self._delete(corpus, await self.registry.list_versions(corpus), collections)
            if deleted:
                log.warning("removal completed", extra={"fields": {"corpus": corpus, "collections": deleted}})

    async def _own_alias(self, alias: str, versions: list[IndexVersion]) -> bool:
        return (await self.store.get_aliases()).get(alias) in {v.collection for v in versions}

    async def _delete(self, corpus: str, versions: list[IndexVersion], collections: set[str]) -> list[str]:
        alias = alias_name(corpus)
        if await self._own_alias(alias, versions):
            await self.store.set_alias(alias, None)
        deleted = []
        for version in versions:
            if version.collection in collections:
                await self.store.delete_collection(version.collection)
                deleted.append(version.collection)
        return deleted
