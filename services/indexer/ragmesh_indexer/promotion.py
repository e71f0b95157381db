"""Moving the serving alias: promote, roll back, reconcile after a crash, retire old versions.

The registry in PostgreSQL is the source of truth; the Qdrant alias follows it. Each move commits
the registry transaction first and then swaps the alias in one atomic Qdrant call. A process killed
between the two leaves the alias on the old collection — still a consistent, fully built version —
and :meth:`Promoter.reconcile` (run at start-up and before every move) points it at the registry's
active version, so rerunning completes the move. Nothing ever points an alias at a collection that
is not a validated, fully written version.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import alias_name
from ragmesh_common.vectorstore.port import VectorStorePort
from ragmesh_indexer import metrics
from ragmesh_indexer.checkpoints import Checkpoint, no_checkpoint
from ragmesh_indexer.registry import IndexRegistry, PromotionResult, VersionState

log = logging.getLogger("ragmesh.indexer.promotion")


class Promoter:
    def __init__(self, registry: IndexRegistry, store: VectorStorePort, *, retire_after: timedelta,
                 checkpoint: Checkpoint = no_checkpoint,
                 active_ages: metrics.ActiveVersionAges = metrics.ACTIVE_VERSION_AGE) -> None:
        self.registry = registry
        self.store = store
        self.retire_after = retire_after
        self.checkpoint = checkpoint
        self.active_ages = active_ages

    async def promote(self, corpus: str, index_version: str, *, actor: str, reason: str) -> PromotionResult:
        await self.reconcile(corpus)
        version = await self.registry.get_version(corpus, index_version)
        if version.state == VersionState.ACTIVE:
            return PromotionResult(corpus=corpus, active=index_version, previous=None, changed=False)
        # The previous version passed its gates when it was promoted before: promoting it again is a
        # roll-forward (ci rebuilding content that was rolled back lands here).
        if version.state not in (VersionState.VALIDATED, VersionState.PREVIOUS):
            raise RagmeshError(ErrorCode.CONFLICT,
                               f"{index_version} is {version.state.value}; only validated versions are promoted")
        info = await self.store.get_collection(version.collection)
        if not info.exists or info.points != version.stats.chunks:
            raise RagmeshError(ErrorCode.CONFLICT, f"collection of {index_version} is missing or incomplete")
        await self.checkpoint("promote-start")
        result = await self.registry.promote(corpus, index_version, actor=actor, reason=reason)
        await self.checkpoint("promote-committed")
        await self.store.set_alias(alias_name(corpus), version.collection)
        await self.checkpoint("promote-aliased")
        await metrics.note_active(self.registry, corpus, self.active_ages)
        log.info("promoted", extra={"fields": {"corpus": corpus, "active": result.active,
                                                "previous": result.previous}})
        await self.retire(corpus, actor=actor)
        return result

    async def rollback(self, corpus: str, *, actor: str, reason: str) -> PromotionResult:
        await self.reconcile(corpus)
        result = await self.registry.rollback(corpus, actor=actor, reason=reason)
        await self.checkpoint("rollback-committed")
        active = await self.registry.get_version(corpus, result.active)
        await self.store.set_alias(alias_name(corpus), active.collection)
        self.active_ages.set(corpus, active.promoted_at)
        log.info("rolled back", extra={"fields": {"corpus": corpus, "active": result.active}})
        return result

    async def reconcile(self, corpus: str) -> bool:
        """Point the alias at the registry's active version; True when it had to move."""
        active = await self.registry.active_version(corpus)
        if active is None:
            return False
        alias = alias_name(corpus)
        current = (await self.store.get_aliases()).get(alias)
        if current == active.collection:
            return False
        await self.store.set_alias(alias, active.collection)
        log.warning("alias reconciled", extra={"fields": {"corpus": corpus, "from": current, "to": active.collection}})
        return True

    async def reconcile_all(self) -> None:
        """Start-up repair: every alias follows the registry, and no retired version keeps a collection."""
        collections = set(await self.store.list_collections())
        for corpus in await self.registry.list_corpora():
            await self.reconcile(corpus.id)
            await self.sweep(corpus.id, collections)

    async def sweep(self, corpus: str, collections: set[str]) -> list[str]:
        """Delete collections of retired versions: retirement marks the registry first and deletes
        after, so a crash in between leaves a collection nothing can reach any more."""
        removed = []
        for version in await self.registry.list_versions(corpus):
            if version.state == VersionState.RETIRED and version.collection in collections:
                await self.store.delete_collection(version.collection)
                removed.append(version.collection)
        if removed:
            log.warning("retired collections removed", extra={"fields": {"corpus": corpus, "collections": removed}})
        return removed

    async def retire(self, corpus: str, *, actor: str) -> list[str]:
        """Delete collections of versions superseded long enough ago (never active/previous)."""
        retired = []
        for version in await self.registry.retire_eligible(corpus, self.retire_after):
            await self.registry.mark_retired(corpus, version.index_version, actor=actor, reason="retention")
            await self.store.delete_collection(version.collection)
            retired.append(version.index_version)
        return retired
