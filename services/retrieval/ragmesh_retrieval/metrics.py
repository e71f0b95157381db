"""Retrieval's own Prometheus metrics (the shared ones live in ragmesh_common.metrics)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from prometheus_client import Gauge

from ragmesh_common.metrics import DEGRADED, RETRIEVAL_STAGE_DURATION

SERVICE = "retrieval"

# Shared family (rerank observes stage="rerank"): here embed, dense / sparse (a single-signal store
# query) and fusion (one hybrid store query: both prefetches and RRF).
STAGE_DURATION = RETRIEVAL_STAGE_DURATION
ACTIVE_INDEX = Gauge(
    "ragmesh_active_index_info", "1 for the index version each corpus alias serves", ["corpus", "index_version"]
)


@contextmanager
def stage(name: str) -> Iterator[None]:
    start = time.perf_counter()
    try:
        yield
    finally:
        STAGE_DURATION.labels(name).observe(time.perf_counter() - start)


def degraded(component: str) -> None:
    DEGRADED.labels(SERVICE, component).inc()


def publish_active_indexes(active: dict) -> None:  # corpus -> ActiveCorpus
    ACTIVE_INDEX.clear()
    for corpus, entry in active.items():
        ACTIVE_INDEX.labels(corpus, entry.index_version).set(1)
