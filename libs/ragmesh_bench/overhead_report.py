"""What bench/mesh_overhead.py makes of its figures: the passes its smoke run must print, the
runtime's batching between two readings of its counters, and the gateway profile's share per layer.
Pure functions of what the bench read, so tests check them without starting a mesh."""

from __future__ import annotations

from pathlib import Path
from typing import Any

LAYERS = ("retrieval_inprocess", "retrieval_grpc")


def batching_of(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    if not before or not after:
        return {"batched": False}
    passes, requests = after["passes"] - before["passes"], after["requests"] - before["requests"]
    return {"batched": True, "model_passes": int(passes), "requests": int(requests),
            "requests_per_pass": round(requests / passes, 2) if passes else None,
            "mean_queue_wait_ms": round(1000 * (after["wait_s"] - before["wait_s"]) / requests, 2) if requests else None}


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


def profile_shares(collapsed: Path) -> dict[str, Any]:
    """Each layer's share of the busy samples (not start-up, not a thread waiting), in percent."""
    shares = dict.fromkeys([name for name, _ in PROFILE_LAYERS] + ["other (event loop, tasks)"], 0)
    total = 0
    for line in collapsed.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not count.isdigit() or any(s in f for f in frames for s in _START_UP) \
                or any(w in frames[-1] for w in _WAITING):
            continue
        total += int(count)
        deepest, layer = -1, "other (event loop, tasks)"
        for name, marks in PROFILE_LAYERS:
            depth = max((i for i, f in enumerate(frames) if any(m in f for m in marks)), default=-1)
            if depth > deepest:
                deepest, layer = depth, name
        shares[layer] += int(count)
    return {"busy_samples": total,
            "share_pct": {name: round(100 * n / (total or 1), 1) for name, n in shares.items()}}


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
    ratios = {line["concurrency"]: line for line in lines if line.get("kind") == "ratio"}
    for level in levels:
        if ratios.get(level, {}).get("same_results") is None:
            problems.append(f"no ratio line with same_results at {level} clients")
    return problems
