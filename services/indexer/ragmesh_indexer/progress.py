"""Progress of the builds running in this process, for the Status RPC.

A build is visible here from its first file on, before it has an index version (scanning and
chunking come first, because the version's identity depends on their result). Once the candidate
exists, progress is also written to the registry so that other processes see it; writes there are
spaced out, because a progress row is not worth a database round trip per batch.
"""

from __future__ import annotations

import time

import msgspec

from ragmesh_indexer.registry import IndexRegistry

REGISTRY_INTERVAL_S = 0.5


class LiveProgress(msgspec.Struct):
    corpus: str
    stage: str  # scan | chunk | embed | upsert | built
    done: int = 0
    total: int = 0  # 0 while unknown
    index_version: str = ""  # "" until the candidate exists


class BuildTracker:
    def __init__(self, registry: IndexRegistry | None = None) -> None:
        self.registry = registry
        self._live: dict[str, LiveProgress] = {}
        self._written: dict[tuple[str, str], tuple[str, float]] = {}

    def begin(self, corpus: str) -> None:
        self._live[corpus] = LiveProgress(corpus=corpus, stage="scan")

    def end(self, corpus: str) -> None:
        live = self._live.pop(corpus, None)
        if live is not None:
            self._written.pop((corpus, live.index_version), None)

    def get(self, corpus: str) -> LiveProgress | None:
        return self._live.get(corpus)

    def note(self, corpus: str, stage: str, done: int, total: int, index_version: str = "") -> None:
        """Record progress in memory only; safe to call from a worker thread."""
        live = self._live.get(corpus)
        version = index_version or (live.index_version if live else "")
        self._live[corpus] = LiveProgress(corpus=corpus, stage=stage, done=done, total=total,
                                          index_version=version)

    async def report(self, corpus: str, index_version: str, stage: str, done: int, total: int) -> None:
        """Record progress in memory, and in the registry when the stage changed, the stage is
        complete, or the last write is older than REGISTRY_INTERVAL_S."""
        self.note(corpus, stage, done, total, index_version)
        if self.registry is None:
            return
        key = (corpus, index_version)
        last_stage, last_at = self._written.get(key, ("", 0.0))
        now = time.monotonic()
        if stage != last_stage or done >= total or now - last_at >= REGISTRY_INTERVAL_S:
            self._written[key] = (stage, now)
            await self.registry.set_progress(corpus, index_version, stage=stage, done=done, total=total)
