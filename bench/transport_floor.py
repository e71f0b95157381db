"""The floor under the mesh's price: what the transports a search crosses cost with nothing behind them.

    .venv/bin/python bench/transport_floor.py [--calls 2000] [--inprocess-ms MS] [--smoke]

A warm search through the gateway pays, beyond the same search in one process, one HTTP request
into the gateway and two gRPC calls out of it (retrieval's candidates back, rerank's texts out).
This script measures those three with the payloads of a SciFact search and servers that answer
at once, each a process of its own as in the mesh, one client, one call at a time:

- ``http``: POST /api/rag/v1/search to a Litestar app under uvicorn with the gateway's h11
  protocol; the handler decodes the request and answers 10 results (quote and title of SciFact's
  median size); the client is ragmesh_bench.lean_http, as bench/mesh_overhead.py's;
- ``retrieval_call``: ``ragmesh.v1.Retrieval/Search`` answered with 50 scored chunks;
- ``rerank_call``: ``ragmesh.v1.Rerank/Rerank`` with 50 texts and their priors, answered with 50
  results.

Each in two variants: ``bare`` (the library alone: grpc.aio with no interceptor, Litestar with no
plugin) and ``instrumented``, what every ragmesh service runs: for gRPC the server of
ragmesh_common.rpc.server.GrpcServer (OpenTelemetry and error-mapping interceptors, health,
reflection) and the channel and call of ragmesh_common.rpc.client (tracing interceptors, deadline,
request-id metadata); for HTTP the gateway's OpenTelemetry plugin settings; in both, spans go to a
span file through the batch processor, as in the embedded mesh.

Output, one JSON line each: per (transport, variant) the latency at the client (p50, p99, mean ms)
and the CPU per call of the client and of the server process; then per variant a ``floor`` line,
the three transports' p50s and CPU summed: what a warm search through the mesh pays however little
the services do. With ``--inprocess-ms MS`` (bench/mesh_overhead.py's ``inprocess_warm`` p50 at one
client) the floor line also gives the mesh's budget at the issue's goal, gateway / in-process <= 1.3:
0.3 x MS for everything the mesh adds, transports and services' own work together.

``--smoke``: 30 calls of each; checks that every line comes back, not the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Awaitable, Callable

import psutil
from ragmesh.v1 import common_pb2, rerank_pb2, rerank_pb2_grpc, retrieval_pb2, retrieval_pb2_grpc

from search_latency import measure

from ragmesh_bench import harness
from ragmesh_bench.harness import say
from ragmesh_bench.lean_http import lean_client

CANDIDATES = 50  # the gateway's candidate count: chunks back from retrieval, texts out to rerank
TOP_K = 10  # results in the gateway's answer
# Medians over the SciFact index bench/eval_retrieval.py builds (16,041 chunks): quote 521 characters,
# title about 100.
QUOTE = ("Dense and sparse retrieval agree on most of the evidence in this abstract. " * 7)[:520]
TITLE = "A scientific abstract's title, about as long as SciFact's titles are on average, give or take"
QUERY = "What does the immune system do with a dying cell?"
INDEX_VERSION = "v20261205100946428-9b869b"
TRANSPORTS = ("http", "retrieval_call", "rerank_call")
VARIANTS = ("bare", "instrumented")
GOAL_RATIO = 1.3


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--calls", type=int, default=2000, help="timed calls per transport and variant")
    p.add_argument("--warmup", type=int, default=200, help="untimed calls first")
    p.add_argument("--inprocess-ms", type=float, default=None,
                   help="bench/mesh_overhead.py's inprocess_warm p50 at one client: prints the mesh's budget")
    p.add_argument("--smoke", action="store_true", help="30 calls each; checks the lines, not the figures")
    p.add_argument("--serve", choices=[f"{t}:{v}" for t in TRANSPORTS for v in VARIANTS],
                   help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, help=argparse.SUPPRESS)
    return p.parse_args(argv)


# --- payloads --------------------------------------------------------------------------------


def search_response() -> retrieval_pb2.SearchResponse:
    def chunk(i: int) -> common_pb2.Chunk:
        return common_pb2.Chunk(
            chunk_id=f"{i:08x}-0000-4000-8000-000000000000", parent_id=f"{i:08x}-1111-4000-8000-000000000000",
            doc_id=f"doc-{i}", corpus="scifact@eval", library="scifact", version="eval", title=TITLE,
            heading_path=["Abstract"], url=f"https://docs.example/scifact/doc-{i}.md#L3-L9", quote=QUOTE,
            source_path=f"doc-{i}.md", line_start=3, line_end=9,
            download_path=f"/api/rag/v1/files/doc-{i}.md", index_version=INDEX_VERSION)

    return retrieval_pb2.SearchResponse(
        results=[common_pb2.ScoredChunk(chunk=chunk(i), scores={"dense": 0.61, "sparse": 12.5, "fused": 0.03})
                 for i in range(CANDIDATES)],
        query_mode="hybrid", index_versions=[INDEX_VERSION])


def search_request() -> retrieval_pb2.SearchRequest:
    return retrieval_pb2.SearchRequest(query=QUERY, top_k=CANDIDATES, readable_corpora=["scifact@eval"],
                                       request_id="0" * 32)


def rerank_request() -> rerank_pb2.RerankRequest:
    return rerank_pb2.RerankRequest(
        query=QUERY, texts=[f"{TITLE}\nAbstract\n{QUOTE}"] * CANDIDATES, request_id="0" * 32,
        priors=[rerank_pb2.Prior(dense=0.61, sparse=12.5)] * CANDIDATES)


def rerank_response() -> rerank_pb2.RerankResponse:
    return rerank_pb2.RerankResponse(
        results=[rerank_pb2.RerankResult(index=i, score=1.0 - i / CANDIDATES) for i in range(CANDIDATES)],
        model_id="all-MiniLM-L6-v2-onnx-int8", score_kind="fused")


def search_body() -> dict[str, Any]:
    return {"query": QUERY, "top_k": TOP_K}


def search_answer() -> dict[str, Any]:
    """About the gateway's answer to a search: 10 sources with their citation fields."""
    results = [
        {"source_id": f"S{i}", "chunk_id": f"{i:08x}-0000-4000-8000-000000000000", "corpus": "scifact@eval",
         "title": TITLE, "heading_path": ["Abstract"], "quote": QUOTE,
         "url": f"https://docs.example/scifact/doc-{i}.md#L3-L9", "source_path": f"doc-{i}.md",
         "line_start": 3, "line_end": 9, "index_version": INDEX_VERSION,
         "scores": {"dense": 0.61, "sparse": 12.5, "fused": 0.03, "rerank": 0.9}}
        for i in range(1, TOP_K + 1)]
    return {"request_id": "0" * 32, "index_versions": [INDEX_VERSION], "degraded": [], "results": results}


# --- servers (each run as ``--serve TRANSPORT:VARIANT --port P`` in a process of its own) ------


def serve(which: str, port: int) -> None:
    transport, variant = which.split(":")
    if variant == "instrumented":
        from ragmesh_common.telemetry import setup_telemetry

        setup_telemetry(f"floor-{transport}", level="WARNING")  # spans to RAGMESH_TRACE_FILE
    if transport == "http":
        serve_http(port, instrumented=variant == "instrumented")
    else:
        asyncio.run(serve_grpc(transport, port, instrumented=variant == "instrumented"))


def serve_http(port: int, *, instrumented: bool) -> None:
    import uvicorn
    from litestar import Litestar, post

    from ragmesh_common.http_protocol import JsonErrorH11Protocol

    answer = search_answer()

    @post("/api/rag/v1/search", status_code=200)
    async def search(data: dict[str, Any]) -> dict[str, Any]:
        return answer

    plugins = []
    if instrumented:
        from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryPlugin

        from ragmesh_common.telemetry import ASGI_MESSAGE_SPANS, http_server_span_details

        plugins.append(OpenTelemetryPlugin(OpenTelemetryConfig(
            scope_span_details_extractor=http_server_span_details, exclude_spans=ASGI_MESSAGE_SPANS)))
    app = Litestar([search], plugins=plugins, logging_config=None, debug=False)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                http=JsonErrorH11Protocol)


class _Retrieval(retrieval_pb2_grpc.RetrievalServicer):
    def __init__(self) -> None:
        self.answer = search_response()

    async def Search(self, request, context):  # noqa: N802
        return self.answer


class _Rerank(rerank_pb2_grpc.RerankServicer):
    def __init__(self) -> None:
        self.answer = rerank_response()

    async def Rerank(self, request, context):  # noqa: N802
        return self.answer


async def serve_grpc(transport: str, port: int, *, instrumented: bool) -> None:
    import grpc

    register, servicer, name = (
        (retrieval_pb2_grpc.add_RetrievalServicer_to_server, _Retrieval(), "ragmesh.v1.Retrieval")
        if transport == "retrieval_call" else
        (rerank_pb2_grpc.add_RerankServicer_to_server, _Rerank(), "ragmesh.v1.Rerank"))
    if instrumented:
        from ragmesh_common.rpc.server import GrpcServer

        server = GrpcServer("floor", host="127.0.0.1", port=port, metrics_port=None)
        server.add(register, servicer, name)
        await server.start()
        await server.server.wait_for_termination()
    else:
        bare = grpc.aio.server()
        register(servicer, bare)
        bare.add_insecure_port(f"127.0.0.1:{port}")
        await bare.start()
        await bare.wait_for_termination()


# --- clients ---------------------------------------------------------------------------------


async def timed(call: Callable[[Any], Awaitable[Any]], calls: int, warmup: int, server: psutil.Process
                ) -> dict[str, Any]:
    await measure(call, [None] * warmup, 1)
    client = psutil.Process()
    before = (sum(client.cpu_times()[:2]), sum(server.cpu_times()[:2]))
    stats = await measure(call, [None] * calls, 1)
    after = (sum(client.cpu_times()[:2]), sum(server.cpu_times()[:2]))
    if stats["errors"]:
        raise SystemExit(f"transport_floor: {stats['errors']} of {calls} calls failed")
    return {"p50_ms": stats["p50_ms"], "p99_ms": stats["p99_ms"], "mean_ms": stats["mean_ms"],
            "client_cpu_ms": round((after[0] - before[0]) / calls * 1000, 3),
            "server_cpu_ms": round((after[1] - before[1]) / calls * 1000, 3)}


async def run_http(port: int, calls: int, warmup: int, server: psutil.Process) -> dict[str, Any]:
    body = search_body()
    async with lean_client(f"http://127.0.0.1:{port}") as client:
        async def call(_: Any) -> None:
            answer = await client.post_json("/api/rag/v1/search", body)
            if len(answer["results"]) != TOP_K:
                raise RuntimeError("short answer")

        return await timed(call, calls, warmup, server)


async def run_grpc(transport: str, port: int, instrumented: bool, calls: int, warmup: int,
                   server: psutil.Process) -> dict[str, Any]:
    import grpc

    from ragmesh_common.rpc.client import open_channel, unary

    target = f"127.0.0.1:{port}"
    channel = open_channel(target) if instrumented else grpc.aio.insecure_channel(target)
    if transport == "retrieval_call":
        method, request = retrieval_pb2_grpc.RetrievalStub(channel).Search, search_request()
    else:
        method, request = rerank_pb2_grpc.RerankStub(channel).Rerank, rerank_request()
    await channel.channel_ready()

    async def call(_: Any) -> None:
        if instrumented:
            answer = await unary(method, request, timeout=10.0, peer="floor")
        else:
            answer = await method(request, timeout=10.0)
        if len(answer.results) != CANDIDATES:
            raise RuntimeError("short answer")

    try:
        return await timed(call, calls, warmup, server)
    finally:
        await channel.close()


def start_server(which: str, port: int, trace_file: Path) -> subprocess.Popen:
    env = {**os.environ, "RAGMESH_TRACE_FILE": str(trace_file)}
    return subprocess.Popen([sys.executable, __file__, "--serve", which, "--port", str(port)], env=env,
                            stdout=subprocess.DEVNULL)


def accepts(port: int) -> bool:
    """A TCP connection to the port opens (a gRPC port gives no HTTP 2xx to wait for)."""
    with socket.create_connection(("127.0.0.1", port), timeout=1):
        return True


async def measure_one(transport: str, variant: str, calls: int, warmup: int, folder: Path) -> dict[str, Any]:
    if variant == "instrumented":
        # The clients' spans go to the span file too, as the gateway's do.
        from ragmesh_common.telemetry import setup_telemetry

        os.environ["RAGMESH_TRACE_FILE"] = str(folder / "spans.jsonl")
        setup_telemetry("floor-client", level="WARNING")
    port, process = await asyncio.to_thread(
        harness.serve, lambda port: start_server(f"{transport}:{variant}", port, folder / "spans.jsonl"), accepts)
    try:
        server = psutil.Process(process.pid)
        if transport == "http":
            return await run_http(port, calls, warmup, server)
        return await run_grpc(transport, port, variant == "instrumented", calls, warmup, server)
    finally:
        process.terminate()
        process.wait(timeout=30)


def emit(**fields: Any) -> None:
    print(json.dumps({"bench": "transport_floor", **fields}), flush=True)


def floor_line(variant: str, lines: dict[str, dict[str, Any]], inprocess_ms: float | None) -> dict[str, Any]:
    cpu = sum(lines[t]["client_cpu_ms"] + lines[t]["server_cpu_ms"] for t in TRANSPORTS)
    line = {"kind": "floor", "variant": variant, "of": " + ".join(TRANSPORTS),
            "p50_ms": round(sum(lines[t]["p50_ms"] for t in TRANSPORTS), 3), "cpu_ms": round(cpu, 3)}
    if inprocess_ms is not None:
        budget = round((GOAL_RATIO - 1.0) * inprocess_ms, 3)
        line.update(inprocess_ms=inprocess_ms, budget_ms=budget,
                    left_for_the_services_ms=round(budget - line["p50_ms"], 3))
    return line


async def run(args: argparse.Namespace) -> None:
    calls, warmup = (30, 5) if args.smoke else (args.calls, args.warmup)
    emit(kind="config", calls=calls, warmup=warmup, candidates=CANDIDATES, top_k=TOP_K,
         retrieval_response_bytes=search_response().ByteSize(),
         rerank_request_bytes=rerank_request().ByteSize(),
         http_response_bytes=len(json.dumps(search_answer())), cpus=os.cpu_count(),
         loadavg_1m=round(os.getloadavg()[0], 2))
    with tempfile.TemporaryDirectory(prefix="transport-floor-") as tmp:
        for variant in VARIANTS:
            lines = {}
            for transport in TRANSPORTS:
                say(f"{transport} ({variant}): {calls} calls")
                lines[transport] = await measure_one(transport, variant, calls, warmup, Path(tmp))
                emit(kind="call", transport=transport, variant=variant, calls=calls, **lines[transport],
                     loadavg_1m=round(os.getloadavg()[0], 2))
            emit(**floor_line(variant, lines, args.inprocess_ms))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.serve:
        serve(args.serve, args.port)
        return 0
    asyncio.run(run(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
