"""Index administration on behalf of an operator: checks the caller's index scopes, records who
asked and why."""

from __future__ import annotations

import logging

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.index_admin.ports import (
    BuildResult,
    CorpusSpec,
    IndexAdmin,
    IndexStatus,
    PromoteResult,
    RemoveResult,
)

log = logging.getLogger("ragmesh.gateway.index_admin")


class IndexAdminService:
    def __init__(self, admin: IndexAdmin) -> None:
        self._admin = admin

    async def build(self, spec: CorpusSpec, *, force: bool, reason: str, caller: Caller) -> BuildResult:
        caller.require(Scope.INDEX_BUILD)
        log.info(
            "index build requested", extra={"fields": {"corpus": spec.corpus, "actor": caller.principal}}
        )
        return await self._admin.build(spec, force=force, actor=caller.principal, reason=reason,
                                       admin=caller.is_admin)

    async def promote(self, corpus: str, index_version: str, *, reason: str, caller: Caller) -> PromoteResult:
        caller.require(Scope.INDEX_PROMOTE)
        log.info(
            "index promote requested",
            extra={"fields": {"corpus": corpus, "index_version": index_version, "actor": caller.principal}},
        )
        return await self._admin.promote(corpus, index_version, actor=caller.principal, reason=reason)

    async def rollback(self, corpus: str, *, reason: str, caller: Caller) -> PromoteResult:
        caller.require(Scope.INDEX_PROMOTE)
        log.info("index rollback requested", extra={"fields": {"corpus": corpus, "actor": caller.principal}})
        return await self._admin.rollback(corpus, actor=caller.principal, reason=reason)

    async def status(self, corpus: str, caller: Caller) -> IndexStatus:
        caller.require(Scope.INDEX_BUILD, Scope.INDEX_PROMOTE)
        return await self._admin.status(corpus)

    async def remove(self, corpus: str, *, dry_run: bool, reason: str, caller: Caller) -> RemoveResult:
        # Taking a corpus away from every reader is an administrator's call, not an index builder's.
        caller.require(Scope.ADMIN)
        log.warning(
            "corpus removal requested",
            extra={"fields": {"corpus": corpus, "dry_run": dry_run, "actor": caller.principal}},
        )
        return await self._admin.remove(corpus, dry_run=dry_run, actor=caller.principal, reason=reason)
