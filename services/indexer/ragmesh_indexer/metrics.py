"""The indexer's own Prometheus metrics (the shared gRPC ones live in ragmesh_common.metrics).

What an operator alerts on (deploy/observability/alerts.yml): how long builds take and how they
end, how many chunks went through the embedder, which validation gates stop candidates, and how long
each corpus has served its active version. Names follow deploy/observability/METRICS.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from datetime import datetime

from prometheus_client import REGISTRY, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ragmesh_indexer.registry import IndexRegistry

log = logging.getLogger("ragmesh.indexer.metrics")

# How a build ends: a new candidate written, an identical version returned, or an error (cancelled:
# the caller hung up or the indexer stopped mid-build; the registry marks both failed candidates).
BUILD_OUTCOMES = ("built", "reused", "failed", "cancelled")
# validation.py's blocking gates; internal_links is only reported, so it never counts as a failure.
BLOCKING_GATES = ("point_count", "vector_config", "quotes_at_lines", "probes")
# Builds take from seconds (a small corpus, all vectors reused) to hours (a large first build).
BUILD_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400)

BUILD_DURATION = Histogram(
    "ragmesh_index_build_duration_seconds", "Index builds (dry runs left out), by corpus and how they ended",
    ["corpus", "outcome"], buckets=BUILD_BUCKETS,
)
CHUNKS_EMBEDDED = Counter(
    "ragmesh_index_chunks_embedded", "Chunks the indexer sent through the embedding model (reused vectors left out)",
    ["corpus"],
)
GATE_FAILURES = Counter(
    "ragmesh_index_gate_failures", "Blocking validation gates a candidate failed, by corpus and gate",
    ["corpus", "gate"],
)


class ActiveVersionAges(Collector):
    """``ragmesh_index_active_version_age_seconds{corpus}``: seconds since each corpus's active
    version was promoted, computed at scrape time from promotion times the registry recorded (see
    :func:`refresh_active_ages`), so a restarted indexer reports the same ages as before."""

    name = "ragmesh_index_active_version_age_seconds"
    documentation = "Seconds since the corpus's active index version was promoted (from the registry)"
    labelnames = ("corpus",)

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._promoted: dict[str, float] = {}  # corpus -> promotion time, seconds since the epoch

    def replace(self, promoted: dict[str, datetime]) -> None:
        self._promoted = {corpus: at.timestamp() for corpus, at in promoted.items()}

    def set(self, corpus: str, promoted_at: datetime | None) -> None:
        promoted = dict(self._promoted)
        if promoted_at is None:
            promoted.pop(corpus, None)
        else:
            promoted[corpus] = promoted_at.timestamp()
        self._promoted = promoted  # one assignment: a scrape on another thread sees old or new

    def describe(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        now = self._clock()
        for corpus, at in sorted(self._promoted.items()):
            family.add_metric([corpus], max(0.0, now - at))
        yield family


ACTIVE_VERSION_AGE = ActiveVersionAges()
REGISTRY.register(ACTIVE_VERSION_AGE)


def track_corpus(corpus: str) -> None:
    """Zero series for a corpus's label values, so ``increase()`` sees its first failure."""
    for outcome in BUILD_OUTCOMES:
        BUILD_DURATION.labels(corpus, outcome)
    CHUNKS_EMBEDDED.labels(corpus)
    for gate in BLOCKING_GATES:
        GATE_FAILURES.labels(corpus, gate)


def observe_build(corpus: str, outcome: str, seconds: float) -> None:
    BUILD_DURATION.labels(corpus, outcome).observe(seconds)


def count_embedded(corpus: str, chunks: int) -> None:
    CHUNKS_EMBEDDED.labels(corpus).inc(chunks)


def count_gate_failure(corpus: str, gate: str) -> None:
    GATE_FAILURES.labels(corpus, gate).inc()


async def note_active(registry: IndexRegistry, corpus: str, ages: ActiveVersionAges = ACTIVE_VERSION_AGE) -> None:
    """After a promotion or rollback: the corpus's age restarts from its new active version."""
    active = await registry.active_version(corpus)
    ages.set(corpus, active.promoted_at if active is not None else None)


async def refresh_active_ages(registry: IndexRegistry, ages: ActiveVersionAges = ACTIVE_VERSION_AGE) -> None:
    """Read every corpus's active version from the registry (at start-up, then periodically: a
    corpus removed or moved by another writer must not keep its old age)."""
    promoted: dict[str, datetime] = {}
    for corpus in await registry.list_corpora():
        track_corpus(corpus.id)
        active = await registry.active_version(corpus.id)
        if active is not None and active.promoted_at is not None:
            promoted[corpus.id] = active.promoted_at
    ages.replace(promoted)


async def refresh_active_ages_forever(registry: IndexRegistry, *, every_s: float,
                                      ages: ActiveVersionAges = ACTIVE_VERSION_AGE) -> None:
    """The indexer's background task: promotions here update the ages at once; this rereads the
    registry every ``every_s`` for what it learnt otherwise (a corpus removed, another writer)."""
    while True:
        try:
            await refresh_active_ages(registry, ages)
        except Exception:  # noqa: BLE001 - PostgreSQL away: keep the last ages, try again later
            log.warning("active version ages not refreshed", exc_info=True)
        await asyncio.sleep(every_s)
