"""Time to ready and peak memory of the embedded mesh, as `make run` starts it.

    .venv/bin/python bench/mesh_footprint.py [--corpus docs]

Starts the runtime and the five services from a fresh state folder (PostgreSQL and Redis from
RAGMESH_POSTGRES_URL / RAGMESH_REDIS_URL, else the test servers on 127.0.0.1), indexes the corpus,
waits for /health/ready, asks one question, and prints one JSON line: seconds to ready (processes
up, corpus indexed and promoted) and the peak resident memory (VmHWM) of each process and in total.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ragmesh_bench.harness import RunningMesh, mesh_on_scratch_database
from ragmesh_bench.smoke import parse_args

ROOT = Path(__file__).resolve().parents[1]


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    import asyncpg  # noqa: F401 - fail early when the venv is incomplete

    from ragmesh_cli.gateway_client import stream_answer
    from ragmesh_cli.mesh import MeshPorts
    from ragmesh_cli.mesh.commands import wait_ready

    parser = argparse.ArgumentParser()
    parser.add_argument("--corpus", default=str(ROOT / "docs"))
    parser.add_argument("--question", default="What does the indexer service own?")
    parser.add_argument("--port-base", type=int, default=23000)
    args = parse_args(parser)
    if args.smoke:
        return smoke_pass(args.question)

    with mesh_on_scratch_database(MeshPorts(args.port_base), prefix="ragmesh_footprint") as mesh:
        started = time.monotonic()
        mesh.start(log=lambda m: None)
        processes_up = time.monotonic() - started
        done = subprocess.run([sys.executable, "-m", "ragmesh_cli.main", "index", "ci", "--corpus", args.corpus],
                              env=mesh.env(), capture_output=True, text=True)
        if done.returncode != 0:
            print(done.stderr, file=sys.stderr)
            return 1
        wait_ready(mesh.gateway_url, timeout=60)
        ready = time.monotonic() - started
        t0 = time.monotonic()
        answer = stream_answer(mesh.gateway_url, args.question, headers={}, timeout=120)
        answer_s = time.monotonic() - t0
        peaks = {svc: round(peak_rss_mib(p.pid), 1) for svc, p in mesh.processes.items()}
        print(json.dumps({
            "processes_up_s": round(processes_up, 1), "ready_s": round(ready, 1),
            "first_answer_s": round(answer_s, 2),
            "answer_status": (answer.get("terminal") or {}).get("answer_status"),
            "peak_rss_mib": peaks, "peak_rss_total_mib": round(sum(peaks.values()), 1),
            "corpus": os.path.relpath(args.corpus, ROOT), "cpus": os.cpu_count(),
        }))
        return 0


def smoke_pass(question: str) -> int:
    """The running mesh (its processes from its state folder's records): one answer, peak memory."""
    from ragmesh_cli.gateway_client import stream_answer
    from ragmesh_cli.mesh.lifecycle import StateFolder

    mesh = RunningMesh.from_env()
    t0 = time.monotonic()
    answer = stream_answer(mesh.gateway_url, question, headers={}, timeout=120)
    terminal = answer.get("terminal") or {}
    if terminal.get("event") != "done":
        raise SystemExit(f"the chat stream ended with {terminal}")
    children = StateFolder(Path(os.environ["RAGMESH_STATE_DIR"])).read_record()["children"]
    peaks = {svc: round(peak_rss_mib(int(entry["pid"])), 1) for svc, entry in children.items()}
    print(json.dumps({"smoke": True, "first_answer_s": round(time.monotonic() - t0, 2),
                      "answer_status": terminal.get("answer_status"), "peak_rss_mib": peaks,
                      "peak_rss_total_mib": round(sum(peaks.values()), 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
