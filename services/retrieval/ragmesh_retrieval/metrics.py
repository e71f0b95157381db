"""Retrieval's own Prometheus metrics (the shared ones live in ragmesh_common.metrics)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from prometheus_client import Gauge

from ragmesh_common.metrics import DEGRADED, RETRIEVAL_STAGE_DURATION

SERVICE = "retrieval"
# What a search can do without (see domain/search.py): the query embedding, an embedding from the
# index's own model, and the index's lexical (BM25) settings.
DEGRADABLE_COMPONENTS = ("embedding", "embedding_model", "lexical")

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


# Zero series, so a healthy retrieval exports ragmesh_degraded_total (at 0) for the dashboards.
for _component in DEGRADABLE_COMPONENTS:
    DEGRADED.labels(SERVICE, _component)


def degraded(component: str) -> None:
    DEGRADED.labels(SERVICE, component).inc()


def publish_active_indexes(active: dict) -> None:  # corpus -> ActiveCorpus
    ACTIVE_INDEX.clear()
    for corpus, entry in active.items():
        ACTIVE_INDEX.labels(corpus, entry.index_version).set(1)
