"""What an index build costs the searches and chats served beside it, on one shared runtime.

    .venv/bin/python bench/search_during_build.py [--clients 4] [--quiet-s 20] [--build DIR] [--smoke]

The embedded mesh (`ragmesh up`, as the fault drills start it: ragmesh_bench.drill_mesh) serves the
e2e corpus; the drills' load (``clients`` loops of searches, chats and follow-ups, half the searches
with new words so the runtime embeds them) runs throughout. After ``--quiet-s`` seconds of load alone,
the indexer builds ``--build`` (default: this repository's docs/, some 750 chunks) as a new corpus on
the same runtime, which also serves every search's query vector and rerank. Output, one JSON line
per window (``quiet``: the load alone; ``build``: while the build ran) and op (search, chat,
follow-up): requests, answered, degraded (by part: ``rerank`` is a rerank past its deadline), p50 /
p95 / p99 / max latency in ms, and one ``build`` line: chunks, seconds, chunks/s.

Before session 28 the runtime served requests in arrival order, and a build's queued batches held
up the searches' (docs/indexing.md, "More than one runtime"). To compare, run this script with the
interpreter of a checkout from before that change (its ragmesh_bench is the one imported).

``--smoke``: a two-document build and 5 s windows; exits non-zero unless every line came back and
the build succeeded (checks the lines, not the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from ragmesh_bench.drill_mesh import ROOT, DrillMesh, Load, Sample


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--quiet-s", type=float, default=20.0, help="seconds of load alone before the build")
    p.add_argument("--build", type=Path, default=ROOT / "docs", help="the folder the build indexes")
    p.add_argument("--corpus", type=Path, default=ROOT / "tests" / "fixtures" / "e2e_corpus",
                   help="the corpus the mesh serves")
    p.add_argument("--smoke", action="store_true")
    return p.parse_args(argv)


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def window(samples: list[Sample], name: str) -> list[dict]:
    """One line per op: counts, degraded parts, latency of the answered requests."""
    lines = []
    for op in sorted({s.op for s in samples}):
        of_op = [s for s in samples if s.op == op]
        answered = [s for s in of_op if s.answered]
        ms = [1000 * (s.ended - s.started) for s in answered]
        lines.append({
            "bench": "search_during_build", "kind": "window", "window": name, "op": op,
            "requests": len(of_op), "answered": len(answered),
            "degraded": dict(Counter(part for s in answered for part in s.degraded)),
            "failed": dict(Counter(s.code or str(s.status) for s in of_op if not s.answered)),
            "p50_ms": percentile(ms, 0.5), "p95_ms": percentile(ms, 0.95), "p99_ms": percentile(ms, 0.99),
            "max_ms": round(max(ms), 1) if ms else None,
        })
    return lines


def build(mesh: DrillMesh, folder: Path, corpus: str) -> tuple[float, dict]:
    """Index ``folder`` as ``corpus`` through the mesh's indexer; (seconds, its final status)."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "ragmesh_cli.main", "index", "ci", "--corpus", corpus,
                           "--source", str(folder), "--addr", f"127.0.0.1:{mesh.ports.port('indexer')}"],
                          capture_output=True, text=True, timeout=3600)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the build failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return seconds, json.loads(done.stdout)["build"]


def smoke_folder(into: Path) -> Path:
    into.mkdir(parents=True)
    (into / "a.md").write_text("# Alpha\n\nThe alpha service keeps a ledger of jobs.\n", encoding="utf-8")
    (into / "b.md").write_text("# Beta\n\nThe beta queue retries a job three times.\n", encoding="utf-8")
    return into


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    quiet_s = 5.0 if args.smoke else args.quiet_s
    state = Path(tempfile.mkdtemp(prefix="ragmesh-search-during-build-"))
    state.chmod(0o755)  # embedded PostgreSQL runs as `nobody` when we are root
    scratch = Path(tempfile.mkdtemp(prefix="ragmesh-build-folder-"))
    folder = smoke_folder(scratch / "smoke-build") if args.smoke else args.build.resolve()
    mesh = DrillMesh(state, args.corpus)
    lines: list[dict] = []
    try:
        mesh.start()
        load = Load(mesh.gateway, clients=args.clients)
        load.start()
        time.sleep(5)  # the load's first requests warm the caches; not counted
        t0 = time.monotonic()
        time.sleep(quiet_s)
        t1 = time.monotonic()
        seconds, status = build(mesh, folder, "buildload@1")
        t2 = time.monotonic()
        load.stop()
        lines += window(load.since(t0, t1), "quiet") + window(load.since(t1, t2), "build")
        chunks = int(status.get("chunks", 0))
        lines.append({"bench": "search_during_build", "kind": "build", "folder": str(folder), "chunks": chunks,
                      "embedded": int(status.get("embedded", 0)),
                      "seconds": round(seconds, 1), "chunks_per_s": round(chunks / seconds, 1) if seconds else None,
                      "clients": args.clients, "loadavg_1m": round(os.getloadavg()[0], 2)})
    finally:
        mesh.stop()
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(scratch, ignore_errors=True)
    for line in lines:
        print(json.dumps(line), flush=True)
    if args.smoke:
        windows = {(line["window"], line["op"]) for line in lines if line["kind"] == "window"}
        if not {("quiet", "search"), ("build", "search")} <= windows or not lines[-1]["chunks"]:
            print(f"smoke: missing lines or an empty build: {lines}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
