"""What bench/mesh_overhead.py makes of its figures: the passes its smoke run must print, the
runtime's batching between two readings of its counters, the gateway profile's share per layer, and
where one search's time goes hop by hop (from the spans every process writes).
Pure functions of what the bench read, so tests check them without starting a mesh."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

LAYERS = ("retrieval_inprocess", "retrieval_grpc")


# The runtime's batching counters (ragmesh_runtime.http.metrics) as batching_of names them.
BATCH_COUNTERS = {"ragmesh_runtime_batch_requests_count": "passes", "ragmesh_runtime_batch_requests_sum": "requests",
                  "ragmesh_runtime_queue_wait_seconds_sum": "wait_s"}


def batch_counters(metrics: str) -> dict[str, float]:
    """Model passes, the requests they served and their summed queue wait, from the runtime's
    /metrics text, summed over their labels (the priority of the passes); empty from a runtime that
    does not batch."""
    found: dict[str, float] = {}
    for line in metrics.splitlines():
        sample, _, value = line.rpartition(" ")
        name = BATCH_COUNTERS.get(sample.partition("{")[0])
        if name is not None:
            found[name] = found.get(name, 0.0) + float(value)
    return found


def batching_of(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    if not before or not after:
        return {"batched": False}
    passes, requests = after["passes"] - before["passes"], after["requests"] - before["requests"]
    return {"batched": True, "model_passes": int(passes), "requests": int(requests),
            "requests_per_pass": round(requests / passes, 2) if passes else None,
            "mean_queue_wait_ms": round(1000 * (after["wait_s"] - before["wait_s"]) / requests, 2) if requests else None}


def gc_counters(metrics: str) -> dict[str, float]:
    """Each generation's collections and the seconds they took (ragmesh_common.heap's
    ``ragmesh_gc_pause_seconds``: ``count2``, ``sum2``, ...) and the objects frozen at startup
    (``frozen``), from a process's /metrics text; empty from a process without them."""
    found: dict[str, float] = {}
    for line in metrics.splitlines():
        sample, _, value = line.rpartition(" ")
        name, _, labels = sample.partition("{")
        if name == "ragmesh_gc_frozen_objects":
            found["frozen"] = float(value)
        elif name in ("ragmesh_gc_pause_seconds_count", "ragmesh_gc_pause_seconds_sum"):
            generation = labels.partition('generation="')[2].partition('"')[0]
            found[f"{name.rsplit('_', 1)[1]}{generation}"] = float(value)
    return found


def gc_pauses(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]]) -> dict[str, dict]:
    """Per process, between two readings of :func:`gc_counters`: its full (generation 2) collections,
    the milliseconds they took, and the milliseconds of all its collections. A full collection stalls
    every request in flight in its process."""
    out = {}
    for process, now in after.items():
        was = before.get(process)
        if not was or not now:
            continue
        delta = {key: now[key] - was.get(key, 0.0) for key in now}
        out[process] = {"full": int(delta.get("count2", 0)), "full_ms": round(1000 * delta.get("sum2", 0.0), 1),
                        "all_ms": round(1000 * sum(v for k, v in delta.items() if k.startswith("sum")), 1)}
    return out


def cpu_ms_per_search(before: dict[str, float], after: dict[str, float], searches: int) -> dict[str, float]:
    """CPU milliseconds each process spent per search between two readings of its CPU seconds (user
    + system), and their ``total``: on a machine of few cores the total, not the latency, bounds how
    many searches per second the mesh can serve."""
    if not searches:
        return {}
    per = {name: round(1000 * (after[name] - before[name]) / searches, 2) for name in after if name in before}
    return {**per, "total": round(sum(per.values()), 2)}


# Where a busy sample of the serving gateway is: the layer whose frame sits deepest on its stack
# (py-spy frames read "function (file:line)"), so each sample counts once and a middleware's share is
# its own work, not what it wraps.
PROFILE_LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("uvicorn: HTTP parsing and writing (h11)", ("uvicorn/",)),
    ("request context: request id, metrics, access log", ("RequestContextMiddleware.__call__",)),
    ("host check", ("AllowedHosts.__call__",)),
    ("Litestar: routing, OpenTelemetry server span, exception layer",
     ("Litestar.__call__", "OpenTelemetryMiddleware.__call__", "ASGIRouter.__call__")),
    ("edge checks: rate limit, auth, strict body", ("edge_checks",)),
    ("search pipeline, own work", ("SearchController.search",)),
    ("gRPC calls (grpc.aio, protobuf)", ("grpc/aio/", "grpc/_common")),
    ("protobuf to domain objects", ("chunk_from_pb", "scored_from_pb")),
    ("response encoding", ("encode_json", "to_response", "msgspec")),
    ("log lines", ("Logger._log",)),
    ("span export thread (span file)", ("BatchProcessor.worker",)),
    ("worker threads (asyncio.to_thread: injection guard)", ("concurrent/futures/thread.py",)),
]
_START_UP = ("_find_and_load", "create_app", "setup_telemetry")
# A thread blocked in C (a pool worker on its queue, a selector) shows as its last Python frame.
_WAITING = ("Condition.wait", "EpollSelector.select", "Event.wait", "SimpleQueue.get", "_worker (")


def _busy_samples(collapsed: Path) -> Iterator[tuple[list[str], int]]:
    """Each stack of py-spy's collapsed file (its frames, outermost first) and its sample count,
    leaving out start-up and threads waiting."""
    for line in collapsed.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not count.isdigit() or any(s in f for f in frames for s in _START_UP) \
                or any(w in frames[-1] for w in _WAITING):
            continue
        yield frames, int(count)


def profile_shares(collapsed: Path) -> dict[str, Any]:
    """Each layer's share of the busy samples (not start-up, not a thread waiting), in percent."""
    shares = dict.fromkeys([name for name, _ in PROFILE_LAYERS] + ["other (event loop, tasks)"], 0)
    total = 0
    for frames, count in _busy_samples(collapsed):
        total += count
        deepest, layer = -1, "other (event loop, tasks)"
        for name, marks in PROFILE_LAYERS:
            depth = max((i for i, f in enumerate(frames) if any(m in f for m in marks)), default=-1)
            if depth > deepest:
                deepest, layer = depth, name
        shares[layer] += count
    return {"busy_samples": total,
            "share_pct": {name: round(100 * n / (total or 1), 1) for name, n in shares.items()}}


def top_frames(collapsed: Path, most: int = 15) -> dict[str, Any]:
    """The functions most busy samples were in (the deepest frame of each busy sample, start-up and
    waiting threads left out), in percent: where a process other than the gateway spends its CPU."""
    counts: dict[str, int] = defaultdict(int)
    total = 0
    for frames, count in _busy_samples(collapsed):
        total += count
        counts[frames[-1]] += count
    ranked = sorted(counts.items(), key=lambda item: -item[1])[:most]
    return {"busy_samples": total, "top_pct": {frame: round(100 * n / (total or 1), 1) for frame, n in ranked}}


def smoke_failures(lines: list[dict], levels: list[int]) -> list[str]:
    """What a full run prints, checked line by line (the API this bench measures, not its figures)."""
    problems = []
    passes = {(line["path"], line["concurrency"]): line for line in lines if line.get("kind") == "pass"}
    for level in levels:
        for path in ("gateway_fresh", "gateway_warm", "inprocess_warm", *LAYERS):
            line = passes.get((path, level))
            if line is None:
                problems.append(f"no {path} pass at {level} clients")
            elif line["errors"] or not line["requests"] or line.get("p50_ms") is None:
                problems.append(f"{path} at {level} clients: {line}")
            elif path.startswith("gateway") and not {"gateway", "retrieval", "runtime", "total"} \
                    <= set(line.get("cpu_ms_per_search", {})):
                problems.append(f"{path} at {level} clients: no CPU per search of the mesh's processes")
    ratios = {line["concurrency"]: line for line in lines if line.get("kind") == "ratio"}
    hops = {line["concurrency"]: line for line in lines
            if line.get("kind") == "hops" and line.get("path") == "gateway_warm"}
    for level in levels:
        if ratios.get(level, {}).get("same_results") is None:
            problems.append(f"no ratio line with same_results at {level} clients")
        if not hops.get(level, {}).get("searches"):
            problems.append(f"no hops line with searches at {level} clients (span names changed?)")
    return problems


# The spans of one search through the gateway, as each process names them (service, kind, name).
SEARCH_SPANS = {
    "gateway": ("ragmesh-gateway", "SERVER", "POST /api/rag/v1/search"),
    "retrieval_call": ("ragmesh-gateway", "CLIENT", "/ragmesh.v1.Retrieval/Search"),
    "retrieval": ("ragmesh-retrieval", "SERVER", "/ragmesh.v1.Retrieval/Search"),
    "store": ("ragmesh-retrieval", "CLIENT", "qdrant.query_points"),
    "rerank_call": ("ragmesh-gateway", "CLIENT", "/ragmesh.v1.Rerank/Rerank"),
    "rerank": ("ragmesh-rerank", "SERVER", "/ragmesh.v1.Rerank/Rerank"),
    "runtime_call": ("ragmesh-rerank", "CLIENT", "POST"),
    "runtime": ("ragmesh-runtime", "SERVER", "POST /rerank"),
}
# A search whose query vector retrieval had to ask for (a fresh one) has two spans more: retrieval's
# call (role query_embedding, named after the embedder) and the runtime's /embed.
EMBED_SPAN = ("ragmesh-runtime", "SERVER", "POST /embed")
# Each hop's time in one search, from its spans' durations (ms): what a process does itself is its
# span less the calls it makes; a hop is the caller's client span less the callee's server span
# (serialising, the loopback, waking the other process).
HOPS: dict[str, Any] = {
    "gateway_own": lambda d: d["gateway"] - d["retrieval_call"] - d["rerank_call"],
    "retrieval_hop": lambda d: d["retrieval_call"] - d["retrieval"],
    "retrieval_own": lambda d: d["retrieval"] - d["store"] - d.get("query_embedding", 0.0),
    "store": lambda d: d["store"],
    "rerank_hop": lambda d: d["rerank_call"] - d["rerank"],
    "rerank_own": lambda d: d["rerank"] - d["runtime_call"],
    "runtime_hop": lambda d: d["runtime_call"] - d["runtime"],
    "runtime": lambda d: d["runtime"],
}
# Only fresh searches have these (both embedding spans).
EMBED_HOPS: dict[str, Any] = {
    "embed_hop": lambda d: d["query_embedding"] - d["runtime_embed"],
    "runtime_embed": lambda d: d["runtime_embed"],
}


def hop_breakdown(spans: Iterable[dict[str, Any]], start_ns: int, end_ns: int) -> dict[str, Any]:
    """Median ms per hop over the searches whose gateway span started within [start_ns, end_ns),
    with ``searches`` (how many had every span) and ``gateway_ms`` (the gateway span itself); and
    ``slowest_tenth_ms``, each hop's mean over the tenth of those searches whose gateway span was
    longest (at least one): where a tail comes from. Where every search embedded its query (fresh
    ones), the /embed call's hop and the runtime's /embed are there too."""
    by_trace: dict[str, dict[str, float]] = defaultdict(dict)
    wanted = {key: role for role, key in SEARCH_SPANS.items()}
    wanted[EMBED_SPAN] = "runtime_embed"
    started: dict[str, int] = {}
    for span in spans:
        duration = (span["end_ns"] - span["start_ns"]) / 1e6
        role = wanted.get((span.get("service"), span.get("kind"), span.get("name")))
        if role is None and span.get("service") == "ragmesh-retrieval" and str(span.get("name", "")).startswith("embeddings"):
            role = "query_embedding"
        if role is None:
            continue
        by_trace[span["trace_id"]].setdefault(role, duration)
        if role == "gateway":
            started[span["trace_id"]] = span["start_ns"]
    complete = [d for trace, d in by_trace.items()
                if start_ns <= started.get(trace, -1) < end_ns and all(role in d for role in SEARCH_SPANS)]
    if not complete:
        return {"searches": 0}
    hops = dict(HOPS)
    if all("query_embedding" in d and "runtime_embed" in d for d in complete):
        hops.update(EMBED_HOPS)
    slowest = sorted(complete, key=lambda d: d["gateway"])[-max(1, len(complete) // 10):]
    return {"searches": len(complete),
            "gateway_ms": round(statistics.median(d["gateway"] for d in complete), 2),
            "median_ms": {hop: round(statistics.median(of(d) for d in complete), 2) for hop, of in hops.items()},
            "slowest_tenth_ms": {hop: round(statistics.fmean(of(d) for d in slowest), 2) for hop, of in hops.items()}}
