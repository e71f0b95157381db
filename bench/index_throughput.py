"""Indexer throughput end to end, against the CPU runtime's raw embedding rate on the same texts.

Writes the first N SciFact documents as Markdown files into a temporary folder, starts the CPU
runtime, the retrieval process (owner of the local Qdrant store) and the indexer as their own
processes, exactly as ``ragmesh up`` does, and times one gRPC Build of that folder: scan, parse,
chunk, embed, BM25-encode and upsert. It then sends the very texts the indexer embedded straight to
the runtime's ``/embed`` with the indexer's batch size, before and after the build: one request
after another (``raw_embed_chunks_per_s``), and with as many requests in flight as the indexer keeps
(``raw_concurrent_chunks_per_s``). Prints one JSON line; ``ratio`` = indexer chunks/s ÷ raw
chunks/s (goal ≥ 0.85); ``ratio_vs_concurrent_raw`` is the stricter comparison. On a shared
machine the wall-clock figures swing with other load, so it also reports the CPU seconds each
process used during the build and ``cpu_ratio``: chunks per CPU-second of runtime + retrieval +
indexer during the build over the runtime's chunks per CPU-second when embedding alone.

    .venv/bin/python bench/index_throughput.py [--docs 500] [--batch 32] [--concurrency 2] [--runtimes 2]

``--runtimes N`` starts N runtime processes, each with cores/N inference threads, and gives the
indexer all of them (RAGMESH_EMBED_URLS); the raw passes then feed all N at once too, so the ratio
still compares the indexer with the same embedders on the same cores.

Needs PostgreSQL (RAGMESH_POSTGRES_URL or RAGMESH_TEST_POSTGRES_URL, default 127.0.0.1:5432); the
registry goes to a throwaway schema that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from ragmesh_bench.harness import RunningMesh
from ragmesh_bench.smoke import parse_args, scratch_folder, tiny_beir
from ragmesh_cli.mesh import Mesh, MeshPorts
from ragmesh_indexer.settings import IndexerSettings

SCIFACT = Path("/work/shared/datasets/scifact")
DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"


def write_corpus(folder: Path, docs: int, dataset: Path = SCIFACT) -> int:
    """The first ``docs`` documents of a BEIR folder as ``<id>.md`` files: an H1 title, then the text."""
    plain = dataset / "corpus.jsonl"
    opener = open if plain.exists() else gzip.open
    source = plain if plain.exists() else dataset / "corpus.jsonl.gz"
    folder.mkdir(parents=True, exist_ok=True)
    written = 0
    with opener(source, "rt", encoding="utf-8") as handle:
        for line in handle:
            if written >= docs:
                break
            doc = json.loads(line)
            title = " ".join(doc.get("title", "").split()) or f"Document {doc['_id']}"
            (folder / f"{doc['_id']}.md").write_text(f"# {title}\n\n{doc['text'].strip()}\n", encoding="utf-8")
            written += 1
    return written


def embedding_texts(folder: Path) -> list[str]:
    """What the indexer embeds for this folder, computed with its own domain code and settings."""
    from ragmesh_indexer.app import build_options
    from ragmesh_indexer.writing import embedding_text
    from ragmesh_indexer.domain import ScanConfig, UrlScheme, chunk_document, scan_corpus

    options = build_options(IndexerSettings.from_env())
    scan = scan_corpus(folder, ScanConfig(max_file_bytes=options.max_file_bytes))
    articles = [chunk_document(d, corpus="bench@1", config=options.chunking, urls=UrlScheme(base=""))
                for d in scan.documents]
    return [embedding_text(a, c) for a in articles for c in a.chunks]


def raw_embed_rate(runtimes: list[str], texts: list[str], batch: int, concurrency: int = 1) -> float:
    """Chunks per second the runtimes embed when fed back to back, ``batch`` texts per request and
    ``concurrency`` requests in flight to each (1: one after another, the plain client)."""

    async def run() -> float:
        starts = iter(range(0, len(texts), batch))
        clients = [httpx.AsyncClient(base_url=runtime, timeout=600) for runtime in runtimes]

        async def worker(client: httpx.AsyncClient) -> None:
            for start in starts:
                resp = await client.post("/embed", json={"inputs": texts[start:start + batch],
                                                         "normalize": True, "truncate": True})
                resp.raise_for_status()

        try:
            started = time.perf_counter()
            await asyncio.gather(*(worker(client) for client in clients for _ in range(concurrency)))
            return len(texts) / (time.perf_counter() - started)
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))

    return asyncio.run(run())


async def timed_build(indexer_addr: str, root: Path, corpus: str = "bench@1") -> tuple[float, object]:
    """One Build, as `ragmesh index build` runs it (progress lines on stderr)."""
    from types import SimpleNamespace

    from ragmesh.v1 import indexer_pb2
    from ragmesh_cli.indexer_client import IndexerClient

    library, version = corpus.split("@")
    request = indexer_pb2.BuildRequest(
        corpus=indexer_pb2.CorpusSpec(corpus=corpus, library=library, version=version, root=str(root)),
        force=True, actor="bench", reason="throughput", admin=True)  # an operator, as `ragmesh index build`
    async with IndexerClient(SimpleNamespace(addr=indexer_addr, timeout=3600)) as indexer:
        started = time.perf_counter()
        reply = await indexer.build(request, label=corpus, stream=sys.stderr)
        return time.perf_counter() - started, reply


def smoke_pass() -> int:
    """A build of the e2e corpus's files through the running mesh's indexer, raw /embed around it,
    then the corpus removed again (the mesh serves what it served before)."""
    from types import SimpleNamespace

    from ragmesh.v1 import indexer_pb2
    from ragmesh_cli.indexer_client import IndexerClient

    mesh = RunningMesh.from_env()
    corpus_dir, corpus = scratch_folder() / "corpus", f"benchsmoke{uuid.uuid4().hex[:6]}@1"
    docs = write_corpus(corpus_dir, 10, tiny_beir())
    texts = embedding_texts(corpus_dir)
    raw = raw_embed_rate([mesh.runtime_url], texts, 4)

    async def build_and_remove() -> tuple[float, object]:
        built = await timed_build(mesh.indexer_addr, corpus_dir, corpus)
        async with IndexerClient(SimpleNamespace(addr=mesh.indexer_addr, timeout=120)) as indexer:
            await indexer.call("Remove", indexer_pb2.RemoveRequest(corpus=corpus, actor="bench", reason="smoke"))
        return built

    seconds, reply = asyncio.run(build_and_remove())
    if reply.chunks != len(texts):
        raise SystemExit(f"the indexer built {reply.chunks} chunks, the bench computed {len(texts)}")
    print(json.dumps({"bench": "index_throughput", "smoke": True, "docs": docs, "chunks": reply.chunks,
                      "build_seconds": round(seconds, 2), "raw_embed_chunks_per_s": round(raw, 2)}))
    return 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def drop_schema(url: str, schema: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    finally:
        await conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--docs", type=int, default=500)
    parser.add_argument("--batch", type=int, default=32, help="texts per /embed request (indexer and raw)")
    parser.add_argument("--concurrency", type=int, default=None,
                        help="indexer embed requests in flight (default: the indexer's own default)")
    parser.add_argument("--runtimes", type=int, default=1,
                        help="runtime processes the indexer spreads its batches over (RAGMESH_EMBED_URLS)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs) afterwards")
    parser.add_argument("--indexer-pythonpath", default="",
                        help="run the indexer process from this folder instead (e.g. an older checkout's "
                             "services/indexer), for before/after comparisons")
    args = parse_args(parser)
    if args.smoke:
        return smoke_pass()

    pg = os.environ.get("RAGMESH_POSTGRES_URL") or os.environ.get("RAGMESH_TEST_POSTGRES_URL") or DEFAULT_PG
    schema = f"bench_{uuid.uuid4().hex[:12]}"
    work = Path(tempfile.mkdtemp(prefix="ragmesh-bench-"))
    corpus = work / "corpus"
    docs = write_corpus(corpus, args.docs)
    # The runtime's vector cache would answer the second pass over the same texts from memory.
    extra = {"RAGMESH_POSTGRES_URL": pg, "RAGMESH_INDEXER_PG_SCHEMA": schema,
             "RAGMESH_INDEXER_EMBED_BATCH": str(args.batch), "RAGMESH_RUNTIME_MAX_CLIENT_BATCH_SIZE": "256",
             "RAGMESH_RUNTIME_EMBED_CACHE_ENTRIES": "0",
             # The indexer reads only folders under its corpus roots (corpus_roots.py).
             "RAGMESH_CORPUS_ROOTS": str(work)}
    if args.concurrency:
        extra["RAGMESH_INDEXER_EMBED_CONCURRENCY"] = str(args.concurrency)
    runtimes_n = max(1, args.runtimes)
    if runtimes_n > 1:
        extra["RAGMESH_RUNTIME_INTRA_OP_THREADS"] = str(max(1, (os.cpu_count() or 1) // runtimes_n))
    os.environ.update(extra)  # for embedding_texts(), which reads the indexer's settings
    if args.indexer_pythonpath:
        extra["PYTHONPATH"] = args.indexer_pythonpath
    # The extra runtimes are meshes of one process each, on ports of their own.
    extras = [Mesh(state_dir=work / f"state-runtime-{n}", ports=MeshPorts.free_block(), extra_env=extra)
              for n in range(1, runtimes_n)]
    mesh = Mesh(state_dir=work / "state", ports=MeshPorts.free_block(), extra_env=extra)
    runtimes = [f"http://127.0.0.1:{m.ports.port('runtime')}" for m in (mesh, *extras)]
    if runtimes_n > 1:
        extra["RAGMESH_EMBED_URLS"] = ",".join(runtimes)
    try:
        for other in extras:
            other.start_one("runtime")
        for svc in ("runtime", "retrieval", "indexer"):
            mesh.start_one(svc)
            mesh.wait_ready(svc, timeout=180)
        for other in extras:
            other.wait_ready("runtime", timeout=180)
        texts = embedding_texts(corpus)
        in_flight = args.concurrency or IndexerSettings.from_env().embed_concurrency
        pids = {svc: mesh.processes[svc].pid for svc in ("runtime", "retrieval", "indexer")}
        runtime_pids = [pids["runtime"], *(other.processes["runtime"].pid for other in extras)]
        # warm-up: first ONNX runs are slow
        raw_embed_rate(runtimes, texts[: args.batch * 2 * runtimes_n], args.batch)
        # Raw passes around the build, so that a change in machine load hits both sides alike.
        raw_cpu = sum(cpu_seconds(pid) for pid in runtime_pids)
        sequential = [raw_embed_rate(runtimes, texts, args.batch)]
        raw_cpu = sum(cpu_seconds(pid) for pid in runtime_pids) - raw_cpu
        concurrent = [raw_embed_rate(runtimes, texts, args.batch, in_flight)]
        cpu_before = {svc: cpu_seconds(pid) for svc, pid in pids.items()}
        extra_cpu_before = sum(cpu_seconds(pid) for pid in runtime_pids[1:])
        seconds, reply = asyncio.run(timed_build(f"127.0.0.1:{mesh.ports.port('indexer')}", corpus))
        # Where the CPU went during the build: the indexer and retrieval compete with the runtime
        # for the same cores, so their share bounds the ratio on a small machine.
        build_cpu = {svc: round(cpu_seconds(pid) - cpu_before[svc], 2) for svc, pid in pids.items()}
        if extras:
            build_cpu["other_runtimes"] = round(sum(cpu_seconds(pid) for pid in runtime_pids[1:])
                                                - extra_cpu_before, 2)
        concurrent.append(raw_embed_rate(runtimes, texts, args.batch, in_flight))
        sequential.append(raw_embed_rate(runtimes, texts, args.batch))
        if reply.chunks != len(texts):
            print(f"warning: indexer built {reply.chunks} chunks, the bench computed {len(texts)}", file=sys.stderr)
        raw, raw_concurrent = sum(sequential) / 2, sum(concurrent) / 2
        chunks_per_s = reply.chunks / seconds
        print(json.dumps({
            "bench": "index_throughput", "docs": docs, "chunks": reply.chunks, "embedded": reply.embedded,
            "runtimes": runtimes_n, "batch": args.batch, "in_flight": in_flight, "build_seconds": round(seconds, 2),
            "docs_per_s": round(docs / seconds, 2), "chunks_per_s": round(chunks_per_s, 2),
            "raw_embed_chunks_per_s": round(raw, 2), "raw_embed_runs": [round(r, 2) for r in sequential],
            "raw_concurrent_chunks_per_s": round(raw_concurrent, 2),
            "raw_concurrent_runs": [round(r, 2) for r in concurrent],
            "ratio": round(chunks_per_s / raw, 3), "ratio_vs_concurrent_raw": round(chunks_per_s / raw_concurrent, 3),
            "build_cpu_s": build_cpu, "raw_runtime_cpu_s": round(raw_cpu, 2),
            # Load-independent: chunks per CPU-second of the whole pipeline against the runtime's
            # chunks per CPU-second when embedding alone (what the ratio is on an idle machine
            # whose cores the embedding saturates).
            "cpu_ratio": round((reply.chunks / sum(build_cpu.values())) / (len(texts) / raw_cpu), 3),
            "goal": 0.85, "cores": os.cpu_count(),
            "load_avg_1m": round(os.getloadavg()[0], 2),
        }))
        return 0
    finally:
        mesh.stop()
        for other in extras:
            other.stop()
        asyncio.run(drop_schema(pg, schema))
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
