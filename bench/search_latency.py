"""Search latency of the vector store alone, of the retrieval gRPC service, or of a running gateway.

    .venv/bin/python bench/search_latency.py [--points doc|windows] [--stores edge,local]
        [--layers store,grpc] [--concurrency 1,16] [--queries 300] [--embed-url URL]
    .venv/bin/python bench/search_latency.py --url http://127.0.0.1:8080 [--token T] [--corpus ID]

Store and gRPC layers, per store kind (``edge`` = Qdrant Edge, ``local`` = qdrant-client local mode):
1. SciFact (5,183 documents) becomes points: ``doc`` = one point per document (title + abstract),
   ``windows`` = windows of ``--window-sentences`` sentences of each abstract (~12k points);
   dense vectors are real all-MiniLM-L6-v2 vectors from the CPU runtime (started here unless
   ``--embed-url`` is given), cached under ``--cache-dir``; BM25 vectors come from the indexer's encoder;
2. ``store``: the adapter opened in this process, filled (timed) and asked the very HybridQuery the
   retriever sends (ACL filter, dense + BM25 candidates, RRF), query vectors computed beforehand;
3. ``grpc``: ``python -m ragmesh_retrieval`` started over the same folder, asked
   ``ragmesh.v1.Retrieval/Search`` with the query text (so the runtime embeds each query: the
   retrieval embedding cache is off).
With ``--url``, only a running gateway is measured: POST <url>/api/rag/v1/search.

Each configuration prints one JSON line: p50/p95/p99/mean/max in ms at the client, qps, errors, and
the 1-minute load average (this machine may be shared; read numbers together with it). ``concurrency``
clients each send their next request when the previous one is answered.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Awaitable, Callable

import httpx
import msgspec
import numpy as np

from ragmesh_bench.beir_dataset import load_beir
from ragmesh_bench import smoke
from ragmesh_bench.harness import NotServing, RunningMesh, serve_on_free_port
from ragmesh_cli.mesh.lifecycle import stop_process
from ragmesh_common.index_schema import (
    ChunkPayload,
    CollectionMeta,
    CorpusMeta,
    alias_name,
    collection_name,
)
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.vectorstore.port import (
    HybridQuery,
    PointFilter,
    SparseVector,
    StoredPoint,
    VectorStorePort,
)

SCIFACT = Path("/work/shared/datasets/scifact")
CORPUS = "scifact@1"
TOP_K = 10
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--points", choices=("doc", "windows"), default="doc")
    p.add_argument("--window-sentences", type=int, default=5)
    p.add_argument("--docs", type=int, default=0, help="only the first N documents (0: all 5,183)")
    p.add_argument("--stores", default="edge,local", help="comma-separated: edge, local")
    p.add_argument("--layers", default="store,grpc", help="comma-separated: store, grpc")
    p.add_argument("--concurrency", default="1,16", help="comma-separated client counts")
    p.add_argument("--queries", type=int, default=300, help="requests per configuration (SciFact test queries)")
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--embed-url", help="a running TEI-compatible runtime (default: start one)")
    p.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ragmesh-bench-vectors")
    p.add_argument("--url", help="measure a running gateway instead: its base URL")
    p.add_argument("--token", default=os.environ.get("RAGMESH_TOKEN", ""), help="gateway bearer token")
    p.add_argument("--corpus", default="", help="gateway: filters.corpus")
    p.add_argument("--gateway-pid", type=int, default=0,
                   help="gateway: also report that process's CPU ms per search (user + system), which a "
                        "busy machine moves much less than it moves latency")
    p.add_argument("--dataset", type=Path, default=SCIFACT, help="the BEIR folder of documents and queries")
    args = smoke.parse_args(p, argv)
    if args.smoke:  # both stores over the e2e corpus, then the running mesh's gateway (gRPC: not in
        # the smoke pass, it starts a retrieval process of its own)
        args.dataset, args.queries, args.warmup, args.concurrency = smoke.tiny_beir(), 8, 1, "1,2"
        args.layers = "store"
        args.embed_url = RunningMesh.from_env().runtime_url
        args.cache_dir = smoke.scratch_folder() / "vectors"
    return args


# --- data ------------------------------------------------------------------------------------


def corpus_texts(dataset: Path, kind: str, window: int, docs: int) -> list[tuple[str, str, str]]:
    """(doc id, title, text) per point."""
    corpus = list(load_beir(dataset, "test").corpus.items())
    out = []
    for doc_id, (title, text) in corpus[:docs or None]:
        if kind == "doc":
            out.append((doc_id, title, text))
            continue
        sentences = [s for s in _SENTENCE_END.split(text.strip()) if s]
        for start in range(0, max(1, len(sentences)), window):
            out.append((doc_id, title, " ".join(sentences[start:start + window])))
    return out


def scifact_queries(dataset: Path, limit: int) -> list[str]:
    queries = list(load_beir(dataset, "test").queries.values())
    return (queries * (limit // len(queries) + 1))[:limit]


def embed(runtime: str, texts: list[str], cache_dir: Path) -> np.ndarray:
    """Unit vectors of ``texts`` from the runtime, cached per block of 1,024 texts by (model, block):
    an interrupted run resumes where it stopped."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    blocks = []
    with httpx.Client(base_url=runtime, timeout=600) as client:
        model = client.get("/info").json()["model_id"]
        for block_start in range(0, len(texts), 1024):
            block = texts[block_start:block_start + 1024]
            path = cache_dir / f"{hashlib.sha256(json.dumps([model, block]).encode()).hexdigest()[:24]}.npy"
            if not path.exists():
                vectors = []
                for start in range(0, len(block), 32):
                    resp = client.post("/embed", json={"inputs": block[start:start + 32], "normalize": True,
                                                       "truncate": True})
                    resp.raise_for_status()
                    vectors.extend(resp.json())
                np.save(path, np.asarray(vectors, dtype=np.float32))
            blocks.append(np.load(path))
    return np.concatenate(blocks)


def build_points(rows: list[tuple[str, str, str]], dense: np.ndarray, model: str
                 ) -> tuple[list[StoredPoint], CollectionMeta]:
    encoder = LexicalEncoder()
    texts = [f"{title}\n{text}" for _, title, text in rows]
    sparse, avg_len = encoder.encode_documents(texts)
    points = []
    for i, ((doc_id, title, text), vector, bm25) in enumerate(zip(rows, dense, sparse)):
        chunk_id = str(uuid.UUID(int=i + 1))
        payload = ChunkPayload(chunk_id=chunk_id, parent_id=chunk_id, doc_id=doc_id, corpus=CORPUS, library="scifact",
                               version="1", title=title, heading_path=[title], url="", quote=text,
                               source_path=f"scifact/{doc_id}.md", parent_content=text)
        points.append(StoredPoint(id=chunk_id, payload=msgspec.to_builtins(payload), dense=vector.tolist(),
                                  sparse=SparseVector(indices=bm25.indices, values=bm25.values)))
    meta = CollectionMeta(index_version="v1", corpus=CorpusMeta(corpus=CORPUS, library="scifact", version="1"),
                          embedding_model=model, vector_size=int(dense.shape[1]), lexical_version=encoder.version,
                          lexical_config=encoder.config_dict(), avg_len=avg_len,
                          documents=len({r[0] for r in rows}), chunks=len(rows))
    return points, meta


# --- timing ----------------------------------------------------------------------------------


async def measure(call: Callable[[Any], Awaitable[Any]], requests: list[Any], concurrency: int) -> dict:
    latencies: list[float] = []
    errors = 0
    pending = iter(requests)

    async def client() -> None:
        nonlocal errors
        for request in pending:
            started = time.perf_counter()
            try:
                await call(request)
            except Exception:  # noqa: BLE001 - counted, and the run goes on
                errors += 1
                continue
            latencies.append((time.perf_counter() - started) * 1000)

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(concurrency)))
    wall = time.perf_counter() - started
    ms = np.asarray(latencies or [float("nan")])
    return {"concurrency": concurrency, "requests": len(requests), "errors": errors,
            "p50_ms": round(float(np.percentile(ms, 50)), 2), "p95_ms": round(float(np.percentile(ms, 95)), 2),
            "p99_ms": round(float(np.percentile(ms, 99)), 2), "mean_ms": round(float(ms.mean()), 2),
            "max_ms": round(float(ms.max()), 2), "qps": round(len(latencies) / wall, 1),
            "loadavg_1m": round(os.getloadavg()[0], 2)}


def emit(**fields: Any) -> None:
    print(json.dumps({"bench": "search_latency", **fields}), flush=True)


# --- processes -------------------------------------------------------------------------------


def start(args: list[str], env: dict[str, str], log: Path, ready, seconds: float = 120) -> tuple[int, subprocess.Popen]:
    """``python -m <args> --port P`` on a free port, serving there itself (ragmesh_bench.harness):
    (port, process)."""

    def launch(port: int) -> subprocess.Popen:
        with open(log, "ab") as handle:
            return subprocess.Popen([sys.executable, "-m", *args, "--port", str(port)], env=env, stdout=handle,
                                    stderr=subprocess.STDOUT)

    try:
        return serve_on_free_port(launch, ready, timeout=seconds)
    except NotServing as exc:
        raise SystemExit(f"{args[0]}: {exc} (its log: {log})") from None


def stop(process: subprocess.Popen) -> None:
    stop_process(process.pid, timeout=20.0)
    process.wait()


# --- layers ----------------------------------------------------------------------------------


def open_store(kind: str, folder: Path) -> VectorStorePort:
    if kind == "edge":
        from ragmesh_common.vectorstore.edge import EdgeVectorStore

        return EdgeVectorStore(folder)
    from qdrant_client import QdrantClient

    from ragmesh_common.vectorstore.qdrant import QdrantVectorStore

    return QdrantVectorStore(QdrantClient(path=str(folder)))


async def store_layer(kind: str, folder: Path, points: list[StoredPoint], meta: CollectionMeta,
                      queries: list[HybridQuery], levels: list[int], warmup: int) -> None:
    store = open_store(kind, folder)
    try:
        name = collection_name(CORPUS, "v1")
        started = time.perf_counter()
        await store.create_collection(name, meta.vector_size, meta)
        for start_at in range(0, len(points), 256):
            await store.upsert(name, points[start_at:start_at + 256])
        await store.set_alias(alias_name(CORPUS), name)
        seconds = time.perf_counter() - started
        emit(layer="index", store=store.kind, points=len(points), seconds=round(seconds, 2),
             points_per_s=round(len(points) / seconds, 1), loadavg_1m=round(os.getloadavg()[0], 2))
        await measure(store.hybrid_query, queries[:warmup], 1)
        for level in levels:
            emit(layer="store", store=store.kind, points=len(points), **await measure(store.hybrid_query, queries, level))
    finally:
        await store.close()


async def grpc_layer(kind: str, folder: Path, points: int, runtime: str, texts: list[str], levels: list[int],
                     warmup: int, work: Path) -> None:
    from ragmesh.v1 import retrieval_pb2, retrieval_pb2_grpc

    from ragmesh_common.healthcheck import check_grpc
    from ragmesh_common.rpc.client import open_channel

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMESH_")}
    env.update(RAGMESH_VECTOR_STORE=kind, RAGMESH_EDGE_PATH=str(folder), RAGMESH_QDRANT_PATH=str(folder),
               RAGMESH_EMBED_URL=runtime, RAGMESH_RETRIEVAL_EMBED_CACHE="0", RAGMESH_RETRIEVAL_METRICS_PORT="0",
               RAGMESH_STATE_DIR=str(work / "state"), RAGMESH_LOG_LEVEL="WARNING")
    port, process = await asyncio.to_thread(start, ["ragmesh_retrieval"], env, work / f"retrieval-{kind}.log",
                                            lambda p: check_grpc(f"127.0.0.1:{p}", timeout=1))
    try:
        async with open_channel(f"127.0.0.1:{port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalStub(channel)

            async def search(text: str) -> None:
                await stub.Search(retrieval_pb2.SearchRequest(query=text, top_k=TOP_K, readable_corpora=[CORPUS]),
                                  timeout=30)

            await measure(search, texts[:warmup], 1)
            for level in levels:
                emit(layer="grpc", store=f"qdrant-{kind}", points=points, **await measure(search, texts, level))
    finally:
        stop(process)


async def gateway_layer(args: argparse.Namespace, texts: list[str], levels: list[int]) -> None:
    headers = {"authorization": f"Bearer {args.token}"} if args.token else {}
    body_filters = {"filters": {"corpus": args.corpus}} if args.corpus else {}
    async with httpx.AsyncClient(base_url=args.url, headers=headers, timeout=30) as client:
        async def search(text: str) -> None:
            resp = await client.post("/api/rag/v1/search", json={"query": text, "top_k": TOP_K, **body_filters})
            resp.raise_for_status()

        await measure(search, texts[:args.warmup], 1)
        for level in levels:
            before = process_cpu_s(args.gateway_pid) if args.gateway_pid else 0.0
            figures = await measure(search, texts, level)
            if args.gateway_pid:
                spent = process_cpu_s(args.gateway_pid) - before
                figures["gateway_cpu_ms_per_search"] = round(1000 * spent / max(1, len(texts)), 3)
            emit(layer="gateway", url=args.url, **figures)


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (/proc/PID/stat fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def main(args: argparse.Namespace) -> None:
    levels = [int(c) for c in args.concurrency.split(",")]
    texts = scifact_queries(args.dataset, args.queries)
    if args.url:
        await gateway_layer(args, texts, levels)
        return
    work = Path(tempfile.mkdtemp(prefix="ragmesh-latency-"))
    runtime_process = None
    runtime = args.embed_url
    try:
        if runtime is None:
            port, runtime_process = start(["ragmesh_runtime"], dict(os.environ), work / "runtime.log", "/health")
            runtime = f"http://127.0.0.1:{port}"
        rows = corpus_texts(args.dataset, args.points, args.window_sentences, args.docs)
        dense = embed(runtime, [f"{title}\n{text}" for _, title, text in rows], args.cache_dir)
        model = httpx.get(f"{runtime}/info", timeout=10).json()["model_id"]
        points, meta = build_points(rows, dense, model)
        query_vectors = embed(runtime, texts, args.cache_dir)
        encoder = LexicalEncoder()
        queries = []
        for text, vector in zip(texts, query_vectors):
            bm25 = encoder.encode_query(text)
            queries.append(HybridQuery(collection=collection_name(CORPUS, "v1"), filter=PointFilter(corpora=(CORPUS,)),
                                       limit=TOP_K, dense=vector.tolist(),
                                       sparse=SparseVector(indices=bm25.indices, values=bm25.values)))
        for kind in args.stores.split(","):
            folder = work / kind
            if "store" in args.layers:
                await store_layer(kind, folder, points, meta, queries, levels, args.warmup)
            if "grpc" in args.layers:
                if not folder.exists():
                    await store_layer(kind, folder, points, meta, queries, [], 0)
                await grpc_layer(kind, folder, len(points), runtime, texts, levels, args.warmup, work)
    except BaseException:
        for log in sorted(work.glob("*.log")):
            sys.stderr.write(f"--- last lines of {log.name}\n" + "\n".join(log.read_text().splitlines()[-15:]) + "\n")
        raise
    finally:
        if runtime_process is not None:
            stop(runtime_process)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    arguments = parse_args()
    asyncio.run(main(arguments))
    if arguments.smoke:
        mesh = RunningMesh.from_env()
        arguments.url, arguments.corpus = mesh.gateway_url, mesh.corpus
        asyncio.run(main(arguments))
