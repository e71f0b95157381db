"""Time to first token at the gateway vs at the runtime directly; prints one JSON line.

    .venv/bin/python bench/ttft.py --start [--runs 30] [--corpus tests/fixtures/e2e_corpus]
    .venv/bin/python bench/ttft.py --gateway http://127.0.0.1:8080 --runtime http://127.0.0.1:8091

``--start`` runs an embedded mesh of its own (PostgreSQL and Redis from RAGMESH_POSTGRES_URL /
RAGMESH_REDIS_URL, else the test servers on 127.0.0.1) on ports from ``--port-base`` and indexes
``--corpus``; otherwise a running mesh is measured.

Each run asks one question (the questions cycle) both ways, in alternating order:

1. gateway: POST /api/rag/v1/chat/stream. ``meta`` is sent once the search (retrieval + rerank)
   is done, so ``gateway_ttft`` = request -> first ``token`` splits into ``search`` (-> meta) and
   ``generation_path`` (meta -> first token: gateway -> generation service -> runtime and back);
2. runtime: the very messages the generation service sends (same sources: POST /search with
   include_content and the chat top_k, rendered by ragmesh_generation.prompt), streamed from
   POST /v1/chat/completions. ``runtime_first_delta`` is the first content; ``runtime_first_cited``
   the delta that completes the first ``[S#]`` — the generation service releases text one
   verified cited segment at a time, so this is the runtime-side equal of the gateway's first token.

``overhead`` = generation_path - runtime_first_cited, paired per run: what the gateway and the
generation service add on top of the model (goal: p50 <= 20 ms). Every question is asked once
both ways before timing, so the runtime's embedding cache is equally warm for both paths.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

from ragmesh_bench.harness import RunningMesh, mesh_on_scratch_database
from ragmesh_bench.smoke import parse_args

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "What is the default queue depth of the Quokka scheduler?",
    "How often do Quokka workers report heartbeats?",
    "Where are Quokka job results stored by default?",
    "Which Python version does Quokka need?",
    "How do I restart a stalled worker?",
]
GOAL_MS = 20.0


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    if not ordered:
        return {}

    def pick(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))], 1)

    return {"p50": round(statistics.median(ordered), 1), "p95": pick(0.95), "min": round(ordered[0], 1),
            "max": round(ordered[-1], 1)}


def via_gateway(client: httpx.Client, gateway: str, question: str, top_k: int) -> dict[str, float]:
    started = time.perf_counter()
    marks: dict[str, float] = {}
    event = None
    with client.stream("POST", f"{gateway}/api/rag/v1/chat/stream",
                       json={"question": question, "top_k": top_k}) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
                now = (time.perf_counter() - started) * 1000
                if event == "meta":
                    marks["meta"] = now
                elif event == "token" and "token" not in marks:
                    marks["token"] = now
                elif event in ("done", "error"):
                    marks["end"] = now
                    status = event
    if "token" not in marks:
        raise RuntimeError(f"gateway sent no token ({status})")
    return marks


def prompt_for(client: httpx.Client, gateway: str, question: str, top_k: int) -> list[dict[str, str]]:
    from ragmesh_generation.domain import EvidenceSource
    from ragmesh_generation.prompt import build_messages

    found = client.post(f"{gateway}/api/rag/v1/search",
                        json={"query": question, "top_k": top_k, "include_content": True})
    found.raise_for_status()
    sources = [EvidenceSource(r["source_id"], r["title"], " > ".join(r["heading_path"]), r["url"],
                              r["content"] or r["quote"]) for r in found.json()["results"]]
    return build_messages(question, sources)


def via_runtime(client: httpx.Client, runtime: str, messages: list[dict[str, str]]) -> dict[str, float]:
    started = time.perf_counter()
    marks: dict[str, float] = {}
    text = ""
    with client.stream("POST", f"{runtime}/v1/chat/completions",
                       json={"messages": messages, "max_tokens": 512, "stream": True}) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data:") or line.strip() == "data: [DONE]":
                continue
            choices = json.loads(line[5:])["choices"]
            piece = (choices[0].get("delta") or {}).get("content") or "" if choices else ""
            if not piece:
                continue
            now = (time.perf_counter() - started) * 1000
            marks.setdefault("first_delta", now)
            text += piece
            if "first_cited" not in marks and "[S" in text and "]" in text[text.index("[S"):]:
                marks["first_cited"] = now
    if "first_cited" not in marks:
        raise RuntimeError("runtime answer cites nothing (refused?)")
    return marks


def start_mesh(args, stack: contextlib.ExitStack) -> tuple[str, str]:
    from ragmesh_cli.mesh import MeshPorts
    from ragmesh_cli.mesh.commands import wait_ready

    mesh = stack.enter_context(mesh_on_scratch_database(MeshPorts(args.port_base), prefix="ragmesh_ttft",
                                                        extra_env={"RAGMESH_LOG_LEVEL": "WARNING"}))
    mesh.start(log=lambda m: None)
    index = [sys.executable, "-m", "ragmesh_cli.main", "index", "ci", "--corpus", args.corpus,
             "--library", "quokka", "--version", "1.0"]
    done = subprocess.run(index, env=mesh.env(), capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"indexing failed: {done.stderr[-2000:]}")
    wait_ready(mesh.gateway_url, timeout=60)
    return mesh.gateway_url, f"http://127.0.0.1:{mesh.ports.port('runtime')}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gateway", default="http://127.0.0.1:8080")
    parser.add_argument("--runtime", default="http://127.0.0.1:8091")
    parser.add_argument("--start", action="store_true", help="start an embedded mesh of its own")
    parser.add_argument("--corpus", default=str(ROOT / "tests" / "fixtures" / "e2e_corpus"))
    parser.add_argument("--port-base", type=int, default=24000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--top-k", type=int, default=5,
                        help="the gateway's chat default (RAGMESH_CHAT_TOP_K)")
    args = parse_args(parser)
    if args.smoke:
        mesh = RunningMesh.from_env()
        args.gateway, args.runtime, args.start, args.runs = mesh.gateway_url, mesh.runtime_url, False, 2

    stack = contextlib.ExitStack()
    gateway, runtime = args.gateway.rstrip("/"), args.runtime.rstrip("/")
    if args.start:
        with contextlib.ExitStack() as starting:  # a failed start stops what it started
            gateway, runtime = start_mesh(args, starting)
            stack = starting.pop_all()
    try:
        with httpx.Client(timeout=120) as client:
            prompts = {q: prompt_for(client, gateway, q, args.top_k) for q in QUESTIONS}
            for q in QUESTIONS:  # warm-up: both paths, every question
                via_gateway(client, gateway, q, args.top_k)
                via_runtime(client, runtime, prompts[q])
            rows = []
            for i in range(args.runs):
                q = QUESTIONS[i % len(QUESTIONS)]
                if i % 2:
                    direct = via_runtime(client, runtime, prompts[q])
                    gated = via_gateway(client, gateway, q, args.top_k)
                else:
                    gated = via_gateway(client, gateway, q, args.top_k)
                    direct = via_runtime(client, runtime, prompts[q])
                rows.append((gated, direct))
    finally:
        stack.close()

    generation_path = [g["token"] - g["meta"] for g, _ in rows]
    print(json.dumps({
        "bench": "ttft",
        "runs": len(rows),
        "gateway_ttft_ms": percentiles([g["token"] for g, _ in rows]),
        "gateway_search_ms": percentiles([g["meta"] for g, _ in rows]),
        "gateway_generation_path_ms": percentiles(generation_path),
        "runtime_first_delta_ms": percentiles([d["first_delta"] for _, d in rows]),
        "runtime_first_cited_ms": percentiles([d["first_cited"] for _, d in rows]),
        "overhead_ms": percentiles([p - d["first_cited"] for p, (_, d) in zip(generation_path, rows)]),
        "goal_overhead_p50_ms": GOAL_MS,
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
