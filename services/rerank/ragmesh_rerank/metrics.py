"""Rerank metrics.

The retrieval service defines the same family, ``ragmesh_retrieval_stage_duration_seconds{stage}``,
in its own process; rerank only ever observes ``stage="rerank"``. So that both packages can still
be imported into one process (the test suite), the histogram is created unregistered and the
process's composition root exports it with :func:`export` when it serves.
"""

from __future__ import annotations

from prometheus_client import REGISTRY, CollectorRegistry, Histogram

from ragmesh_common.metrics import LATENCY_BUCKETS

STAGE_DURATION = Histogram(
    "ragmesh_retrieval_stage_duration_seconds", "Duration of one retrieval stage", ["stage"],
    buckets=LATENCY_BUCKETS, registry=None,
)


def export(registry: CollectorRegistry = REGISTRY) -> None:
    """Make the rerank metrics visible on the registry that /metrics serves."""
    registry.register(STAGE_DURATION)
