"""The objects a process made while starting, taken out of the cyclic garbage collector's way, and
the collector's pauses in /metrics.

A service imports a few hundred modules (litestar, grpc, opentelemetry, onnxruntime, ...) and builds
its app before it serves: 85,000-162,000 objects the collector tracks, nearly all of them alive until
the process exits. Every full (generation 2) collection walks each of them: in a mesh serving 16
clients on 2 cores those collections took 26-114 ms, and each stalled every request in flight in its
process (docs/performance.md, "Full garbage collections in the tail"). ``gc.freeze`` moves them to
a permanent generation the collector no longer walks, so a full collection sees only what was made
since: 1-5 ms in the same mesh.

``ragmesh_gc_pause_seconds`` (by generation) and ``ragmesh_gc_frozen_objects`` let an operator see
both: every service exports them once its entry point has called :func:`freeze_startup_objects`.
"""

from __future__ import annotations

import gc
import time
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Gauge, Histogram

from ragmesh_common.settings import env_bool

GC_PAUSE = Histogram(
    "ragmesh_gc_pause_seconds", "Cyclic garbage collections and how long each stalled the process",
    ["generation"], buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
)
FROZEN = Gauge("ragmesh_gc_frozen_objects", "Objects frozen at startup, which no collection walks")
GENERATIONS = ("0", "1", "2")

_started_at: list[float] = []  # the running collection's start; one at a time (the collector holds the GIL)
_pauses: tuple[Any, ...] = ()  # GC_PAUSE's series by generation, once collections are timed
_registries: set[int] = set()  # registries besides the default one that export the two metrics


def freeze_startup_objects(registry: CollectorRegistry = REGISTRY) -> int:
    """Collect what startup left as garbage, freeze everything still alive, and from now on time
    every collection into ``registry`` (the runtime keeps a registry of its own); the number frozen.

    Call it once, in a process's entry point, after the app is built and before it serves. A frozen
    object is never collected, so freezing in a process that builds and drops apps (a test run)
    would keep their cycles alive for good. ``RAGMESH_GC_FREEZE=false`` leaves them to the collector
    (what every process did before; bench/mesh_overhead.py compares the two), timed all the same."""
    if env_bool("RAGMESH_GC_FREEZE", True):
        gc.collect()
        gc.freeze()
    frozen = gc.get_freeze_count()
    FROZEN.set(frozen)
    if registry is not REGISTRY and id(registry) not in _registries:
        _registries.add(id(registry))
        for collector in (GC_PAUSE, FROZEN):
            registry.register(collector)
    _observe_collections()
    return frozen


def _observe_collections() -> None:
    global _pauses
    if _pauses:
        return
    # Each generation's series is made here, not in the callback: ``labels`` takes the metric's lock
    # and may allocate, and a collection can start inside any allocation, that one included.
    _pauses = tuple(GC_PAUSE.labels(generation) for generation in GENERATIONS)
    gc.callbacks.append(_time_collection)


def _time_collection(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _started_at[:] = [time.perf_counter()]
    elif _started_at:
        _pauses[info["generation"]].observe(time.perf_counter() - _started_at.pop())
