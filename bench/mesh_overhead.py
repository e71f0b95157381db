"""Search latency through the gateway, and the cost of the mesh: the same searches in-process.

    .venv/bin/python bench/mesh_overhead.py --dataset DIR --state-dir S --database DB
        [--split test] [--queries 300] [--concurrency 1,16] [--top-k 10] [--warmup 20] [--corpus ID]

Input: an index that ``bench/eval_retrieval.py --dataset DIR --state-dir S --database DB`` built and
kept: corpus ``<name>@eval`` (name: DIR's folder name, letters and digits only), its vector store
under S, its registry in PostgreSQL database DB. S is only read (the processes append to S/logs).

What it does:
1. copies the vector store for the in-process path (the retrieval process will lock the original),
   and the runtime's vector cache (S/runtime-vectors.npz) without the vectors of the queries this
   run asks: the runtime loads the copy (and writes it back on exit), so a query that is fresh to
   retrieval is fresh to the runtime too, however often S was searched before;
2. starts the model runtime, retrieval, rerank and the gateway (``ragmesh_cli.mesh.Mesh``, with
   bench/eval_mesh.py's environment; authentication off, no rate limits); the caller's environment
   passes through, so RAGMESH_* settings reach every process and the in-process objects alike;
3. replays the indexer's /embed calls: every chunk's embedded text, sent to the runtime as the
   indexer sent it when it built the index (vectors come from the cache; no model runs). A new
   runtime process is otherwise colder than the one that indexed: /embed also keeps each text's
   WordPiece ids and BM25 terms for the reranker. ``--no-replay`` measures the colder state;
4. builds the in-process pipeline (bench/inprocess_search.py): the gateway's SearchService and
   injection guard over the retrieval service's HybridRetriever and the rerank service's
   RerankService, in this process; the model runtime stays the separate server it is in the mesh.
   Then it freezes this process's objects as every service does once built
   (ragmesh_common.heap; ``RAGMESH_GC_FREEZE=false`` turns that off here and in the mesh alike);
5. for each concurrency level c (``c`` clients, each sending its next query when the previous one
   is answered), over a query set no earlier pass of this run has asked (the --split queries
   first, then the others in queries.jsonl; SciFact: test for c=1, train for c=16):
   - ``gateway_fresh``: POST /api/rag/v1/search through the gateway (``--client lean``, the default:
     ragmesh_bench.lean_http, whose own cost is small beside the gateway's, as a compiled client's
     is; ``--client httpx``: httpx, as before session 28), queries new to every cache:
     the runtime embeds each query (and any candidate passage it has not embedded before). The
     figure for the target (c=1: p50 <= 50 ms, p99 <= 150 ms);
   - ``gateway_warm``: the same queries again: retrieval's query-embedding LRU answers, and the
     runtime's cache holds the query and candidate vectors;
   - an untimed in-process pass over the same queries, which fills the in-process retriever's own
     query-embedding LRU (the runtime's cache is shared and already warm);
   - ``inprocess_warm``: the same queries through the in-process pipeline, timed;
   then the ratio gateway_warm / inprocess_warm at p50 and p99 (goal <= 1.3), and ``same_results``:
   the share of queries whose top-k chunk ids are the same in both warm passes;
   - per layer, what one hop costs (the same queries, warm, the gateway's candidate count):
     ``retrieval_inprocess`` (the retrieval service's HybridRetriever in this process) and
     ``retrieval_grpc`` (``ragmesh.v1.Retrieval/Search`` of the retrieval process, over gRPC);
     the gateway's cost is gateway_warm less inprocess_warm, the gRPC hop's retrieval_grpc less
     retrieval_inprocess;
   - with the fresh pass, ``runtime``: how many model passes the runtime ran for it and how many
     requests they served (its /metrics; ``batched: false`` from a runtime that does not batch).

``--profile-gateway FILE``: py-spy samples the gateway process for the whole run (``--nonblocking``:
it never pauses the process, so the figures stand) into FILE (py-spy's collapsed stacks); after the
run a ``profile`` line gives each layer's share of the samples taken while serving (start-up left out).
``--profile runtime=FILE`` (or retrieval, rerank; repeatable) samples that process the same way, and
its ``profile`` line names the functions most of its busy samples were in.

Each pass line also has ``cpu_ms_per_search``: the CPU (user + system) each process of the mesh,
and this one (``bench``: the clients, and the in-process path), spent per search during the pass.
With few cores their ``total`` bounds the searches per second at many clients. And ``gc``: per
process, the full (generation 2) garbage collections during the pass, their milliseconds and those of
all its collections (ragmesh_common.heap's ``ragmesh_gc_pause_seconds`` on each /metrics); each full
collection stalls every request in flight in its process.
docs/performance.md shows one.

``--smoke``: the whole run above on a dozen built-in documents (indexed first by
bench/eval_retrieval.py into a temporary state dir and database, both removed after), 4 queries per
pass at 1 and 2 clients; exits non-zero unless every pass, ratio and per-layer line came back
without an error.

Output, one JSON line each: the config (corpus, index size, settings, environment overrides), a line
per pass (latency in ms at the client: p50/p95/p99/mean/max, qps, errors, degraded responses, the
1-minute load average; statistics from bench/search_latency.py), a ratio line per level, and after
the run a ``hops`` line per level for each gateway pass (warm and fresh), read from the span file
every process wrote (ragmesh_bench.overhead_report.hop_breakdown): each process's own time and each
hop, the median over the pass's searches and the mean over its slowest tenth; the fresh lines add the
query's /embed (``embed_hop``, ``runtime_embed``). Every process started here is stopped on exit,
Ctrl-C and SIGTERM included.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

import httpx

from eval_mesh import DEFAULT_PG, EvalMesh, database_url, say
from inprocess_search import InProcessPipeline
from search_latency import measure

from ragmesh_bench.beir_dataset import load_beir
from ragmesh_bench.lean_http import lean_client
from ragmesh_bench.mesh_queries import query_pool, query_sets, scrub_runtime_cache
from ragmesh_bench.overhead_report import (LAYERS, batch_counters, batching_of, cpu_ms_per_search, gc_counters,
                                           gc_pauses, hop_breakdown, profile_shares, smoke_failures, top_frames)
from ragmesh_cli.mesh import Mesh
from ragmesh_common.heap import freeze_startup_objects
from ragmesh_common.span_file import default_span_file, read_span_records

SERVICES = ("runtime", "retrieval", "rerank", "gateway")
SEARCH = "/api/rag/v1/search"
GOAL_RATIO = 1.3
GOAL_FRESH_MS = {"p50_ms": 50.0, "p99_ms": 150.0}  # one query at a time, through the gateway
SECRET_WORDS = ("KEY", "TOKEN", "PASSWORD", "SECRET")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", type=Path, help="the BEIR folder the index was built from")
    p.add_argument("--state-dir", type=Path, help="eval_retrieval.py's --state-dir")
    p.add_argument("--database", help="eval_retrieval.py's --database")
    p.add_argument("--split", default="test", help="its queries come first (the c=1 fresh pass)")
    p.add_argument("--queries", type=int, default=300, help="queries per pass")
    p.add_argument("--concurrency", default="1,16", help="comma-separated client counts")
    p.add_argument("--top-k", type=int, default=10)
    p.add_argument("--warmup", type=int, default=20,
                   help="queries of their own, asked of each path first (at least 1: they check the corpus)")
    p.add_argument("--corpus", default="", help="corpus id (default: <dataset name>@eval)")
    p.add_argument("--no-replay", action="store_true",
                   help="skip replaying the indexer's /embed calls (start from a runtime that never saw the chunks)")
    p.add_argument("--profile-gateway", type=Path, default=None,
                   help="py-spy the gateway into this file (collapsed stacks) and print each layer's share")
    p.add_argument("--profile", action="append", default=[], metavar="SERVICE=FILE",
                   help="py-spy another process of the mesh (runtime, retrieval, rerank) into FILE and print "
                        "the functions its busy samples were in; repeatable")
    p.add_argument("--client", choices=("lean", "httpx"), default="lean",
                   help="the HTTP client of the gateway passes: lean (ragmesh_bench.lean_http, about 0.3 ms of CPU "
                        "per search) or httpx (about 2 ms: what the bench used before session 28)")
    p.add_argument("--smoke", action="store_true",
                   help="a tiny built-in corpus, indexed here first; checks the lines, not the figures")
    args = p.parse_args(argv)
    args.profiles = {svc: Path(file) for svc, _, file in (spec.partition("=") for spec in args.profile)}
    if args.profile_gateway:
        args.profiles["gateway"] = args.profile_gateway
    unknown = set(args.profiles) - set(SERVICES)
    if unknown or not all(str(f) not in ("", ".") for f in args.profiles.values()):
        p.error(f"--profile takes SERVICE=FILE, SERVICE one of {', '.join(SERVICES)}")
    if not args.smoke and not (args.dataset and args.state_dir and args.database):
        p.error("--dataset, --state-dir and --database are required (or --smoke)")
    return args


# --- the mesh --------------------------------------------------------------------------------


def build_mesh(state_dir: Path, db_url: str, runtime_cache: Path) -> Mesh:
    mesh = EvalMesh(state_dir, db_url).mesh  # its environment: PostgreSQL, Redis, log level, OMP
    mesh.extra_env.update({
        "RAGMESH_RUNTIME_EMBED_CACHE_FILE": str(runtime_cache),
        "RAGMESH_AUTH_MODE": "disabled",
        "RAGMESH_RATE_LIMITS": "",  # empty: no rate limits
    })
    return mesh


def start_mesh(mesh: Mesh) -> None:
    env = mesh.env()
    for svc in SERVICES:
        mesh.start_one(svc, env)
        mesh.wait_ready(svc, timeout=240)
        say(f"{svc} ready")


# --- the two paths ---------------------------------------------------------------------------

Search = Callable[[str], Awaitable[tuple[list[str], list[str]]]]  # query -> (chunk ids, degraded)


PostJson = Callable[[str, dict], Awaitable[Any]]  # (path, body) -> the decoded JSON of a 2xx answer


@contextlib.asynccontextmanager
async def gateway_poster(client: str, url: str, connections: int) -> AsyncIterator[PostJson]:
    """POSTs to the gateway through ``--client``: ``lean`` (LeanClient.post_json) or ``httpx`` (the
    same contract through httpx), keeping up to ``connections`` connections."""
    if client == "lean":
        async with lean_client(url, timeout=60, max_idle=connections) as lean:
            yield lean.post_json
        return
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        async def post_json(path: str, body: dict) -> Any:
            resp = await http.post(path, json=body)
            resp.raise_for_status()
            return resp.json()

        yield post_json


def gateway_search(post_json: PostJson, corpus: str, top_k: int) -> Search:
    async def search(query: str) -> tuple[list[str], list[str]]:
        body = await post_json(SEARCH, {"query": query, "top_k": top_k, "filters": {"corpus": corpus}})
        return [r["chunk_id"] for r in body["results"]], body["degraded"]

    return search


def inprocess_search(pipeline: InProcessPipeline, corpus: str, top_k: int) -> Search:
    async def search(query: str) -> tuple[list[str], list[str]]:
        outcome = await pipeline.search(query, top_k, corpus)
        return [s.chunk.chunk_id for s in outcome.sources], outcome.degraded

    return search


def retrieval_inprocess(pipeline: InProcessPipeline, corpus: str, candidates: int) -> Search:
    from ragmesh_retrieval.domain.model import SearchInput

    async def search(query: str) -> tuple[list[str], list[str]]:
        assert pipeline.retrieval is not None, "open() first"
        outcome = await pipeline.retrieval.retriever.search(SearchInput(
            query=query, top_k=candidates, readable_corpora=(corpus,), corpora=(corpus,)))
        return [r.chunk.chunk_id for r in outcome.results], list(outcome.degraded)

    return search


def retrieval_grpc(channel: Any, corpus: str, candidates: int) -> Search:
    from ragmesh.v1 import retrieval_pb2, retrieval_pb2_grpc

    from ragmesh_common.rpc.client import unary

    stub = retrieval_pb2_grpc.RetrievalStub(channel)

    async def search(query: str) -> tuple[list[str], list[str]]:
        reply = await unary(stub.Search, retrieval_pb2.SearchRequest(
            query=query, top_k=candidates, readable_corpora=[corpus]), timeout=60, peer="retrieval")
        return [r.chunk.chunk_id for r in reply.results], list(reply.degraded)

    return search


@dataclass(frozen=True)
class Watched:
    """What a pass reads of each process of the mesh, before and after: its CPU (by pid) and its
    garbage collections (its /metrics)."""

    pids: dict[str, int]
    metrics: dict[str, str]

    @classmethod
    def of(cls, mesh: Mesh) -> Watched:
        metrics = {svc: url for svc, url in mesh.metrics_urls().items() if svc in SERVICES}
        return cls(pids={svc: mesh.processes[svc].pid for svc in SERVICES}, metrics=metrics)


async def collections(metrics: dict[str, str]) -> dict[str, dict[str, float]]:
    """Each process's garbage-collection counters now (gc_counters); a process that does not answer
    is left out."""
    async with httpx.AsyncClient(timeout=10) as client:
        texts = await asyncio.gather(*(client.get(url) for url in metrics.values()), return_exceptions=True)
    return {name: gc_counters(response.text) for name, response in zip(metrics, texts)
            if isinstance(response, httpx.Response) and response.status_code == 200}


def cpu_seconds(pids: dict[str, int]) -> dict[str, float]:
    """Each process's CPU seconds so far (user + system); ``bench`` is this process: the clients, and
    the in-process path's retrieval and rerank when it runs."""
    import psutil

    out = {}
    for name, pid in {**pids, "bench": os.getpid()}.items():
        try:
            times = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        out[name] = times.user + times.system
    return out


async def run_pass(search: Search, queries: list[str], concurrency: int,
                   watched: Watched) -> tuple[dict, dict[str, list[str]]]:
    """search_latency.measure over ``queries``; also each query's chunk ids, the degraded answers, the
    first error, the CPU each process of the mesh spent per search and its garbage collections."""
    found: dict[str, list[str]] = {}
    degraded = 0
    first_error = ""

    async def call(query: str) -> None:
        nonlocal degraded, first_error
        try:
            ids, skipped = await search(query)
        except Exception as exc:
            first_error = first_error or f"{type(exc).__name__}: {exc}"[:300]
            raise
        found[query] = ids
        degraded += bool(skipped)

    gc_before = await collections(watched.metrics)
    cpu_before = cpu_seconds(watched.pids)
    stats = await measure(call, queries, concurrency)
    stats["cpu_ms_per_search"] = cpu_ms_per_search(cpu_before, cpu_seconds(watched.pids), len(queries))
    stats["gc"] = gc_pauses(gc_before, await collections(watched.metrics))
    stats["degraded"] = degraded
    if first_error:
        stats["first_error"] = first_error
    return stats, found


def same_share(a: dict[str, list[str]], b: dict[str, list[str]]) -> float | None:
    common = [q for q in a if q in b]
    return round(sum(a[q] == b[q] for q in common) / len(common), 4) if common else None


def emit(**fields: Any) -> None:
    print(json.dumps({"bench": "mesh_overhead", **fields}), flush=True)


# --- main ------------------------------------------------------------------------------------


async def warm_up(name: str, search: Search, queries: list[str], corpus: str, watched: Watched) -> None:
    stats, found = await run_pass(search, queries, 1, watched)
    if not any(found.values()):
        raise SystemExit(f"{name}: the warm-up queries found nothing in corpus {corpus!r}: {stats}")


async def runtime_passes(runtime: httpx.AsyncClient) -> dict[str, float]:
    """The runtime's batching counters (ragmesh_runtime.http.metrics), all priorities together."""
    return batch_counters((await runtime.get("/metrics")).text)


async def measure_level(level: int, queries: list[str], via_gateway: Search, in_process: Search,
                        layers: dict[str, Search], runtime: httpx.AsyncClient,
                        watched: Watched) -> dict[str, tuple[int, int]]:
    """The passes of one level; returns when the gateway passes ran (wall clock, ns), for their hops."""
    counters = await runtime_passes(runtime)
    fresh_started = time.time_ns()
    fresh, _ = await run_pass(via_gateway, queries, level, watched)
    fresh_window = (fresh_started, time.time_ns())
    # /embed of each query (retrieval) and /rerank of its candidates, shared passes or not.
    fresh["runtime"] = batching_of(counters, await runtime_passes(runtime))
    if level == 1:
        fresh["goal"] = GOAL_FRESH_MS
        fresh["goal_met"] = all(fresh[k] <= limit for k, limit in GOAL_FRESH_MS.items())
    emit(kind="pass", path="gateway_fresh", **fresh)
    warm_started = time.time_ns()
    warm, via_gateway_found = await run_pass(via_gateway, queries, level, watched)
    warm_window = (warm_started, time.time_ns())
    emit(kind="pass", path="gateway_warm", **warm)
    await run_pass(in_process, queries, level, watched)  # untimed: fills the in-process query-embedding LRU
    local, in_process_found = await run_pass(in_process, queries, level, watched)
    emit(kind="pass", path="inprocess_warm", **local)
    emit(kind="ratio", concurrency=level, of="gateway_warm / inprocess_warm", goal=GOAL_RATIO,
         p50=round(warm["p50_ms"] / local["p50_ms"], 3), p99=round(warm["p99_ms"] / local["p99_ms"], 3),
         same_results=same_share(via_gateway_found, in_process_found), queries=len(queries))
    for name, search in layers.items():
        stats, _ = await run_pass(search, queries, level, watched)
        emit(kind="pass", path=name, **stats)
    return {"gateway_warm": warm_window, "gateway_fresh": fresh_window}


async def replay_index_embeds(pipeline: InProcessPipeline, runtime_url: str, batch: int = 32) -> dict:
    """Send the runtime every chunk's embedded text, as the indexer did when it built the index.

    The runtime here is a new process over a copy of its vector cache, so no model runs; what this
    restores is the rest of that runtime's state: /embed reads each text for the reranker too
    (WordPiece ids, BM25 terms), and a deployed runtime did that while it indexed."""
    texts = await pipeline.chunk_texts()
    started = time.perf_counter()
    async with httpx.AsyncClient(base_url=runtime_url, timeout=120) as client:
        for start in range(0, len(texts), batch):
            resp = await client.post("/embed", json={"inputs": texts[start:start + batch], "truncate": True})
            resp.raise_for_status()
    return {"texts": len(texts), "seconds": round(time.perf_counter() - started, 1)}


async def measure_all(args: argparse.Namespace, mesh: Mesh, pipeline: InProcessPipeline, corpus: str,
                      levels: list[int], sets: list[list[str]], warmup: list[str], config: dict,
                      windows: dict[int, dict[str, tuple[int, int]]], watched: Watched) -> None:
    try:
        await pipeline.open()
        if not args.no_replay:
            config["replayed_index_embeds"] = await replay_index_embeds(pipeline, mesh.endpoints()["runtime"])
        # As every process of the mesh does once it is built: the in-process path is this process.
        frozen = {name: int(c["frozen"]) for name, c in (await collections(watched.metrics)).items() if "frozen" in c}
        config["frozen_objects"] = {**frozen, "bench": freeze_startup_objects()}
        from ragmesh_common.rpc.client import open_channel

        candidates = max(pipeline.gateway_settings.search_candidates, args.top_k)
        async with gateway_poster(args.client, mesh.gateway_url, max(levels) + 4) as post_json, \
                httpx.AsyncClient(base_url=mesh.endpoints()["runtime"], timeout=30) as runtime, \
                open_channel(f"127.0.0.1:{mesh.ports.port('retrieval')}") as channel:
            via_gateway = gateway_search(post_json, corpus, args.top_k)
            in_process = inprocess_search(pipeline, corpus, args.top_k)
            layers = {"retrieval_inprocess": retrieval_inprocess(pipeline, corpus, candidates),
                      "retrieval_grpc": retrieval_grpc(channel, corpus, candidates)}
            await warm_up("gateway", via_gateway, warmup, corpus, watched)
            await warm_up("in-process", in_process, warmup, corpus, watched)
            emit(kind="config", corpus=corpus, **config, index=await pipeline.index_stats(corpus))
            for level, queries in zip(levels, sets):
                windows[level] = await measure_level(level, queries, via_gateway, in_process, layers, runtime,
                                                           watched)
    finally:
        await pipeline.close()


def run_config(args: argparse.Namespace, levels: list[int], sets: list[list[str]],
               pipeline: InProcessPipeline, cache: dict) -> dict:
    overrides = {k: v for k, v in sorted(os.environ.items())
                 if k.startswith(("RAGMESH_", "OMP_")) and not any(w in k for w in SECRET_WORDS)}
    rerank = pipeline.rerank_settings
    return {
        "dataset": str(args.dataset), "split": args.split, "top_k": args.top_k, "concurrency": levels,
        "queries_per_pass": len(sets[0]), "warmup": args.warmup, "client": args.client, "cpus": len(os.sched_getaffinity(0)),
        "gateway_candidates": pipeline.gateway_settings.search_candidates,
        "retrieval_candidates": pipeline.retrieval_settings.limits.candidates,
        "retrieval_mode": pipeline.retrieval_settings.limits.mode,
        "rerank_priors": {"dense": rerank.prior_dense, "sparse": rerank.prior_sparse},
        "runtime_cache": cache, "env": overrides,
    }


# --- the gateway's profile (its layers: ragmesh_bench.overhead_report) -------------------------

def start_profiler(mesh: Mesh, service: str, target: Path) -> Any:
    import shutil
    import subprocess

    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    return subprocess.Popen([py_spy, "record", "--nonblocking", "--rate", "50", "--format", "raw", "-o",
                             str(target), "--pid", str(mesh.processes[service].pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# --- smoke ------------------------------------------------------------------------------------

SMOKE_TOPICS = [
    ("Giant pandas", "Giant pandas eat bamboo shoots and leaves for most of the day."),
    ("Vitamin D", "Vitamin D deficiency is linked to weaker bones and more fractures in older adults."),
    ("Aspirin", "Low-dose aspirin lowers the risk of a first heart attack in some adults."),
    ("Coffee", "Moderate coffee drinking is not associated with higher blood pressure over time."),
    ("Sleep", "Adults who sleep less than six hours a night report more daytime fatigue."),
    ("Exercise", "Regular aerobic exercise improves insulin sensitivity in people with type 2 diabetes."),
    ("Antibiotics", "Overuse of antibiotics drives the spread of resistant bacteria in hospitals."),
    ("Smoking", "Smoking cessation halves the excess risk of coronary heart disease within a year."),
    ("Salt", "Cutting dietary salt reduces systolic blood pressure in people with hypertension."),
    ("Vaccines", "Measles vaccination gives lasting immunity after two doses in most children."),
    ("Fish oil", "Omega-3 fish oil supplements did not prevent strokes in the large trial."),
    ("Gut bacteria", "The gut microbiome differs between lean and obese twins."),
]
SMOKE_QUERIES = [
    "what do pandas eat", "vitamin D and broken bones", "aspirin heart attack prevention",
    "does coffee raise blood pressure", "short sleep and tiredness", "exercise and insulin",
    "antibiotic resistance in hospitals", "quitting smoking heart disease", "salt and hypertension",
    "measles vaccine doses", "fish oil and stroke", "microbiome of obese twins",
]


def write_smoke_dataset(folder: Path) -> Path:
    """A BEIR folder: one document per topic, one query each, the test qrels pairing them."""
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as corpus:
        for i, (title, text) in enumerate(SMOKE_TOPICS):
            corpus.write(json.dumps({"_id": f"d{i}", "title": title, "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as queries:
        for i, text in enumerate(SMOKE_QUERIES):
            queries.write(json.dumps({"_id": f"q{i}", "text": text}) + "\n")
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(len(SMOKE_QUERIES))))
    return folder


def run_smoke() -> int:
    import contextlib
    import io
    import uuid

    from eval_retrieval import main as eval_retrieval
    from ragmesh_bench.harness import drop_database

    server = os.environ.get("RAGMESH_TEST_POSTGRES_URL", DEFAULT_PG)
    database = f"ragmesh_smoke_{uuid.uuid4().hex[:10]}"
    levels = [1, 2]
    with tempfile.TemporaryDirectory(prefix="ragmesh-mesh-overhead-smoke-") as temp:
        folder = write_smoke_dataset(Path(temp) / "smoke")
        state = Path(temp) / "state"
        printed = io.StringIO()
        try:
            with contextlib.redirect_stdout(sys.stderr):  # its quality line is not this bench's output
                eval_retrieval(["--dataset", str(folder), "--state-dir", str(state), "--database", database,
                                "--stage", "hybrid", "--queries", "2"])
            with contextlib.redirect_stdout(printed):
                main(["--dataset", str(folder), "--state-dir", str(state), "--database", database,
                      "--queries", "4", "--concurrency", ",".join(map(str, levels)), "--warmup", "2"])
        finally:
            drop_database(server, database)
    sys.stdout.write(printed.getvalue())
    problems = smoke_failures([json.loads(line) for line in printed.getvalue().splitlines() if line.strip()], levels)
    for problem in problems:
        say(f"smoke: {problem}")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        return run_smoke()
    # SIGTERM (and SIGINT, which a background job ignores) must still stop the processes.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    levels = [int(c) for c in args.concurrency.split(",")]
    pool = query_pool(args.dataset, args.split)
    sets, warmup = query_sets(pool, args.queries, len(levels), max(1, args.warmup))
    name = load_beir(args.dataset, args.split).name
    corpus = args.corpus or f"{''.join(c for c in name.lower() if c.isalnum()) or 'eval'}@eval"
    server = os.environ.get("RAGMESH_TEST_POSTGRES_URL", DEFAULT_PG)
    with tempfile.TemporaryDirectory(prefix="ragmesh-mesh-overhead-") as temp:
        work = Path(temp)
        cache = scrub_runtime_cache(args.state_dir / "runtime-vectors.npz", work / "runtime-vectors.npz",
                                    [q for s in sets for q in s])
        mesh = build_mesh(args.state_dir, database_url(server, args.database), work / "runtime-vectors.npz")
        pipeline = InProcessPipeline(mesh.env(), work)  # copies the store before retrieval locks it
        profilers: dict[str, Any] = {}
        windows: dict[int, dict[str, tuple[int, int]]] = {}
        try:
            start_mesh(mesh)
            watched = Watched.of(mesh)
            profilers = {svc: start_profiler(mesh, svc, file) for svc, file in args.profiles.items()}
            config = run_config(args, levels, sets, pipeline, cache)
            asyncio.run(measure_all(args, mesh, pipeline, corpus, levels, sets, warmup, config, windows, watched))
        finally:
            mesh.stop()
            for profiler in profilers.values():
                profiler.wait(timeout=60)  # py-spy writes its file once the process has exited
        # Every process flushed its spans as it stopped: where each search's time went.
        span_file = Path(mesh.env().get("RAGMESH_TRACE_FILE") or default_span_file(args.state_dir))
        spans = list(read_span_records(span_file))
        for level, passes in windows.items():
            for path, (start_ns, end_ns) in passes.items():
                emit(kind="hops", concurrency=level, path=path, **hop_breakdown(spans, start_ns, end_ns))
        for svc, file in args.profiles.items():
            emit(kind="profile", of=svc, file=str(file), **(profile_shares(file) if svc == "gateway" else top_frames(file)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
