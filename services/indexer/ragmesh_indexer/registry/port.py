"""The index version registry as the indexer's application code sees it (no database types here).

Errors: an unknown (or removed) corpus or version raises ``RagmeshError(NOT_FOUND)``; a move the lifecycle does
not allow (promoting a candidate, validating a failed build, rolling back with nothing to roll back
to) raises ``RagmeshError(CONFLICT)``. Every state change is recorded as a :class:`VersionEvent`.
"""

from __future__ import annotations

import abc
from datetime import timedelta
from typing import Any

from ragmesh_indexer.registry.model import (
    BuildProgress,
    BuildStats,
    Corpus,
    CorpusSpec,
    IndexVersion,
    PromotionResult,
    VersionEvent,
)


class IndexRegistry(abc.ABC):
    # --- corpora ---------------------------------------------------------------------------------
    @abc.abstractmethod
    async def upsert_corpus(self, spec: CorpusSpec) -> Corpus: ...

    @abc.abstractmethod
    async def get_corpus(self, corpus: str) -> Corpus: ...

    @abc.abstractmethod
    async def list_corpora(self) -> list[Corpus]: ...

    @abc.abstractmethod
    async def remove_corpus(self, corpus: str, *, actor: str, reason: str) -> list[IndexVersion]:
        """Retire every version of the corpus, whatever its state, and mark the corpus removed, in
        one transaction; returns the versions as they were before. From then on the corpus is
        unknown (NOT_FOUND) to every read and move, until ``upsert_corpus`` registers it again.
        Delete the alias and collections *after* this call: retired versions can no longer be
        promoted, so nothing can race the deletion."""

    @abc.abstractmethod
    async def removed_corpora(self) -> list[str]:
        """Ids of removed corpora, for the start-up sweep of what a removal left behind."""

    # --- builds ----------------------------------------------------------------------------------
    @abc.abstractmethod
    async def find_by_hashes(self, corpus: str, content_hash: str, config_hash: str) -> IndexVersion | None:
        """The newest version built from the same content and configuration whose collection still
        exists (not failed, not retired), so a build can return it instead of building again."""

    @abc.abstractmethod
    async def create_candidate(
        self,
        corpus: str,
        index_version: str,
        *,
        content_hash: str,
        config_hash: str,
        collection: str,
        actor: str,
        reason: str = "",
        stats: BuildStats | None = None,
    ) -> IndexVersion: ...

    @abc.abstractmethod
    async def set_stats(self, corpus: str, index_version: str, stats: BuildStats) -> IndexVersion: ...

    @abc.abstractmethod
    async def set_progress(
        self, corpus: str, index_version: str, stage: str, done: int, total: int
    ) -> None: ...

    @abc.abstractmethod
    async def get_progress(self, corpus: str) -> list[BuildProgress]:
        """Progress of the corpus's versions still in ``candidate`` state, newest first."""

    # --- validation ------------------------------------------------------------------------------
    @abc.abstractmethod
    async def mark_validated(
        self, corpus: str, index_version: str, report: dict[str, Any], *, actor: str = "indexer"
    ) -> IndexVersion: ...

    @abc.abstractmethod
    async def mark_failed(
        self,
        corpus: str,
        index_version: str,
        report: dict[str, Any],
        *,
        actor: str = "indexer",
        reason: str = "",
    ) -> IndexVersion: ...

    # --- serving ---------------------------------------------------------------------------------
    @abc.abstractmethod
    async def promote(self, corpus: str, index_version: str, *, actor: str, reason: str) -> PromotionResult:
        """Make a validated (or the previous) version active, atomically. Promoting the active
        version again changes nothing and returns ``changed=False``."""

    @abc.abstractmethod
    async def rollback(self, corpus: str, *, actor: str, reason: str) -> PromotionResult:
        """Swap ``active`` and ``previous``."""

    @abc.abstractmethod
    async def active_version(self, corpus: str) -> IndexVersion | None: ...

    @abc.abstractmethod
    async def get_version(self, corpus: str, index_version: str) -> IndexVersion: ...

    @abc.abstractmethod
    async def list_versions(self, corpus: str) -> list[IndexVersion]:
        """All versions of the corpus, newest first."""

    @abc.abstractmethod
    async def list_events(self, corpus: str, *, limit: int = 100) -> list[VersionEvent]:
        """Audit trail of the corpus, newest first."""

    # --- retirement ------------------------------------------------------------------------------
    @abc.abstractmethod
    async def retire_eligible(self, corpus: str, min_active_age: timedelta) -> list[IndexVersion]:
        """Versions whose collections may go, once the current active version has served for
        ``min_active_age``: failed ones, and validated ones that are superseded (active once, or
        older than the active version). Never the active or previous version, never a candidate,
        never a validated version newer than the active one that was never promoted (it awaits
        promotion)."""

    @abc.abstractmethod
    async def mark_retired(self, corpus: str, index_version: str, *, actor: str, reason: str) -> IndexVersion:
        """Retire a validated or failed version. Call it *before* deleting the collection: once
        retired a version can no longer be promoted, so no promotion can race the deletion."""
