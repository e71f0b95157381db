"""Retrieval quality of the real services on any BEIR folder: one JSON line per stage.

    .venv/bin/python bench/eval_retrieval.py --dataset /work/shared/datasets/scifact --split test
        [--stage all|sparse|dense|hybrid|rerank] [--queries N] [--candidates 50] [--dump FILE]
    .venv/bin/python bench/eval_retrieval.py --dataset DIR --write-corpus FOLDER   # then index FOLDER yourself
    .venv/bin/python bench/eval_retrieval.py --dataset DIR --url http://127.0.0.1:8080 --corpus LIB@VERSION

What it does, in order:
1. writes the corpus as one Markdown file per document (title as ``#`` heading, text as body);
2. starts its own embedded processes with ``ragmesh_cli.mesh.Mesh`` (CPU runtime, retrieval,
   rerank, indexer) on free loopback ports, a fresh PostgreSQL database on 127.0.0.1:5432 and a
   state dir under /tmp;
3. indexes the folder through the real indexer (``python -m ragmesh_cli.main index ci``);
4. queries the real retrieval service over gRPC (``ragmesh.v1.Retrieval/Search``) per stage —
   sparse, dense and hybrid are ``RAGMESH_RETRIEVAL_MODE`` of a restarted retrieval process — and
   for ``rerank`` sends the hybrid candidates (the text the indexer embedded, and retrieval's dense and
   BM25 scores as priors) to the real rerank service, as the gateway
   does;
5. maps each hit to its BEIR document through the payload's ``source_path`` (a document scores
   its best chunk) and evaluates with pytrec_eval (libs/ragmesh_bench/beir_dataset.py).

Chunking and models are set through the usual environment (RAGMESH_INDEXER_CHUNK_MAX_CHARS,
RAGMESH_INDEXER_CHUNKING, RAGMESH_RUNTIME_RERANK_METHOD, ...), which the child processes inherit;
the JSON line repeats every such setting in ``config``. Latency is per query, measured at the
client, one query at a time (rerank: retrieval + rerank).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from ragmesh_bench.beir_dataset import (
    BeirDataset,
    doc_run,
    evaluate,
    file_name,
    load_beir,
    sample_queries,
    write_markdown,
)

from eval_mesh import DEFAULT_PG, EvalMesh, index_corpus, say
from ragmesh_bench import smoke
from ragmesh_bench.harness import RunningMesh, database_url, drop_database, psql

STAGES = ("sparse", "dense", "hybrid", "rerank")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", required=True, type=Path, help="BEIR folder")
    p.add_argument("--split", default="test")
    p.add_argument("--stage", default="all", help=f"all, or a comma-separated list of {', '.join(STAGES)}")
    p.add_argument("--queries", type=int, default=0, help="a seeded sample of this many queries (0: all)")
    p.add_argument("--candidates", type=int, default=50, help="top_k asked of retrieval (the gateway asks 50)")
    p.add_argument("--rerank-text", default="embedded", choices=("quote", "embedded"),
                   help="embedded (as the gateway sends): the text the indexer embedded (title > headings, "
                        "newline, quote), so the runtime's vector cache answers; quote: the chunk text alone")
    p.add_argument("--no-priors", action="store_true",
                   help="send the reranker no retrieval scores (the gateway sends them: dense and BM25)")
    p.add_argument("--dump", type=Path, help="write the hybrid candidates (JSONL) for offline tuning on train")
    p.add_argument("--state-dir", type=Path, help="keep the mesh state here (default: a temp dir, removed)")
    p.add_argument("--database", default="", help="reuse this PostgreSQL database (default: a fresh one, dropped)")
    p.add_argument("--url", default="", help="a running gateway: query its /api/rag/v1/search (stage 'gateway') "
                   "instead of starting a mesh; the corpus must hold the files --write-corpus writes")
    p.add_argument("--corpus", default="", help="with --url: the corpus id to search (library@version)")
    p.add_argument("--token", default=os.environ.get("RAGMESH_TOKEN", ""), help="with --url: bearer token")
    p.add_argument("--write-corpus", type=Path, help="only write the Markdown corpus to this folder and exit")
    return smoke.parse_args(p, argv)


# ---------------------------------------------------------------- querying

class Querier:
    def __init__(self, mesh: EvalMesh, corpus: str, names: dict[str, str], titles: dict[str, str]) -> None:
        self.mesh = mesh
        self.corpus = corpus
        self.names = names
        self.titles = titles

    async def search_all(self, dataset: BeirDataset, query_ids: list[str], candidates: int) -> dict[str, dict]:
        from ragmesh.v1 import retrieval_pb2, retrieval_pb2_grpc

        from ragmesh_common.index_schema import embedding_text
        from ragmesh_common.rpc.client import open_channel, unary

        out: dict[str, dict] = {}
        async with open_channel(self.mesh.addr("retrieval")) as channel:
            stub = retrieval_pb2_grpc.RetrievalStub(channel)
            for number, qid in enumerate(query_ids, 1):
                started = time.perf_counter()
                reply = await unary(stub.Search, retrieval_pb2.SearchRequest(
                    query=dataset.queries[qid], top_k=candidates, readable_corpora=[self.corpus]),
                    timeout=120, peer="retrieval")
                elapsed = time.perf_counter() - started
                hits = [{"doc": self.names[Path(r.chunk.source_path).name], "quote": r.chunk.quote,
                         "embedded": embedding_text(r.chunk.title, list(r.chunk.heading_path), r.chunk.quote),
                         "dense": r.scores.get("dense"), "sparse": r.scores.get("sparse")}
                        for r in reply.results]
                out[qid] = {"hits": hits, "seconds": elapsed, "mode": reply.query_mode,
                            "degraded": list(reply.degraded)}
                if number % 50 == 0:
                    say(f"{self.mesh.mode}: {number}/{len(query_ids)} queries")
        return out

    async def rerank_all(self, dataset: BeirDataset, searched: dict[str, dict], text: str,
                         priors_on: bool) -> dict[str, dict]:
        from ragmesh.v1 import rerank_pb2, rerank_pb2_grpc

        from ragmesh_common.rpc.client import open_channel, unary

        out: dict[str, dict] = {}
        async with open_channel(self.mesh.addr("rerank")) as channel:
            stub = rerank_pb2_grpc.RerankStub(channel)
            for number, (qid, found) in enumerate(searched.items(), 1):
                hits = found["hits"]
                if len(hits) < 2:
                    out[qid] = {"hits": hits, "seconds": found["seconds"], "score_kind": ""}
                    continue
                texts = [h[text] for h in hits]
                priors = [rerank_pb2.Prior(dense=h["dense"], sparse=h["sparse"]) if priors_on else rerank_pb2.Prior()
                          for h in hits]
                started = time.perf_counter()
                reply = await unary(stub.Rerank, rerank_pb2.RerankRequest(
                    query=dataset.queries[qid], texts=texts, priors=priors), timeout=120, peer="rerank")
                elapsed = time.perf_counter() - started
                order = [r.index for r in reply.results]
                order += [i for i in range(len(hits)) if i not in set(order)]
                out[qid] = {"hits": [hits[i] for i in order], "seconds": found["seconds"] + elapsed,
                            "rerank_seconds": elapsed, "score_kind": reply.score_kind, "model": reply.model_id}
                if number % 50 == 0:
                    say(f"rerank: {number}/{len(searched)} queries")
        return out


def stage_report(stage: str, dataset: BeirDataset, split: str, results: dict[str, dict], config: dict) -> dict:
    run = {qid: doc_run([h["doc"] for h in r["hits"]]) for qid, r in results.items()}
    seconds = sorted(r["seconds"] for r in results.values())
    report = {
        "dataset": dataset.name, "split": split, "stage": stage, "queries": len(results),
        **evaluate(dataset.qrels, run),
        "latency_ms_p50": round(1000 * statistics.median(seconds), 1),
        "latency_ms_p95": round(1000 * seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))], 1),
    }
    rerank_seconds = sorted(r["rerank_seconds"] for r in results.values() if "rerank_seconds" in r)
    if rerank_seconds:
        report["rerank_ms_p50"] = round(1000 * statistics.median(rerank_seconds), 1)
        report["score_kind"] = next((r["score_kind"] for r in results.values() if r.get("score_kind")), "")
    degraded = sorted({d for r in results.values() for d in r.get("degraded", [])})
    if degraded:
        report["degraded"] = degraded
    report["config"] = config
    return report


def effective_config(args: argparse.Namespace, index_reply: dict) -> dict:
    settings = {k: v for k, v in sorted(os.environ.items())
                if k.startswith(("RAGMESH_INDEXER_CHUNK", "RAGMESH_RUNTIME_RERANK", "RAGMESH_RETRIEVAL_",
                                 "RAGMESH_VECTOR_STORE", "RAGMESH_RUNTIME_EMBED", "RAGMESH_RERANK_PRIOR"))}
    built = index_reply.get("build", {})
    return {
        "candidates": args.candidates, "rerank_text": args.rerank_text, "rerank_priors": not args.no_priors,
        "documents": int(built.get("documents", 0)), "chunks": int(built.get("chunks", 0)),
        "env": settings,
    }


async def run_stages(args, mesh: EvalMesh, querier: Querier, dataset: BeirDataset, query_ids: list[str],
                     config: dict) -> None:
    stages = STAGES if args.stage == "all" else tuple(s for s in STAGES if s in args.stage.split(","))
    hybrid: dict[str, dict] | None = None
    for stage in stages:
        mode = "hybrid" if stage == "rerank" else stage
        if stage == "rerank" and hybrid is not None:
            searched = hybrid
        else:
            mesh.set_mode(mode)
            searched = await querier.search_all(dataset, query_ids, args.candidates)
        if mode == "hybrid":
            hybrid = searched
            if args.dump:
                with args.dump.open("w", encoding="utf-8") as handle:
                    for qid, found in searched.items():
                        handle.write(json.dumps({"qid": qid, "query": dataset.queries[qid], "hits": [
                            {**h, "title": querier.titles[h["doc"]]} for h in found["hits"]]}) + "\n")
        results = (await querier.rerank_all(dataset, searched, args.rerank_text, not args.no_priors)
                   if stage == "rerank" else searched)
        print(json.dumps(stage_report(stage, dataset, args.split, results, config)), flush=True)


def run_gateway(args: argparse.Namespace, dataset: BeirDataset, query_ids: list[str]) -> None:
    """Stage "gateway": the whole search path (retrieval, rerank, guard) of a running gateway."""
    import httpx

    names = {file_name(doc_id): doc_id for doc_id in dataset.corpus}
    headers = {"authorization": f"Bearer {args.token}"} if args.token else {}
    results: dict[str, dict] = {}
    with httpx.Client(base_url=args.url, headers=headers, timeout=120) as client:
        for qid in query_ids:
            started = time.perf_counter()
            reply = client.post("/api/rag/v1/search", json={
                "query": dataset.queries[qid], "top_k": 20, "filters": {"corpus": args.corpus}})
            elapsed = time.perf_counter() - started
            reply.raise_for_status()
            body = reply.json()
            results[qid] = {"seconds": elapsed, "degraded": body.get("degraded", []), "hits": [
                {"doc": names[Path(r["source_path"]).name]} for r in body["results"]]}
    config = {"url": args.url, "corpus": args.corpus, "top_k": 20}
    print(json.dumps(stage_report("gateway", dataset, args.split, results, config)), flush=True)


class RunningStages:
    """The running mesh's retrieval and rerank, for the smoke pass: its retrieval serves one mode."""

    mode = "hybrid"

    def __init__(self, mesh: RunningMesh) -> None:
        self.addrs = {"retrieval": mesh.retrieval_addr, "rerank": mesh.rerank_addr}

    def addr(self, svc: str) -> str:
        return self.addrs[svc]

    def set_mode(self, mode: str) -> None:
        if mode != self.mode:
            raise SystemExit(f"the running mesh's retrieval serves {self.mode}, not {mode}")


def run_smoke(args: argparse.Namespace) -> int:
    """Hybrid and rerank against the running mesh's services, its dump checked, then its gateway."""
    mesh = RunningMesh.from_env()
    dataset = load_beir(smoke.tiny_beir(), "test")
    query_ids = sample_queries(dataset, 0)
    names = {file_name(doc_id): doc_id for doc_id in dataset.corpus}
    titles = {doc_id: title for doc_id, (title, _) in dataset.corpus.items()}
    args.stage, args.dump, args.split = "hybrid,rerank", smoke.scratch_folder() / "dump.jsonl", "test"
    querier = Querier(RunningStages(mesh), mesh.corpus, names, titles)
    asyncio.run(run_stages(args, querier.mesh, querier, dataset, query_ids, {"smoke": True}))
    rows = [json.loads(line) for line in args.dump.read_text(encoding="utf-8").splitlines()]
    missing = {key for row in rows for hit in row["hits"] for key in smoke.CANDIDATE_KEYS if key not in hit}
    if not rows or missing:
        raise SystemExit(f"the dump changed: {len(rows)} rows, hits without {sorted(missing)}")
    args.url, args.corpus = mesh.gateway_url, mesh.corpus
    run_gateway(args, dataset, query_ids)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.smoke:
        return run_smoke(args)
    # SIGTERM (and SIGINT, which a background job ignores) must still stop the mesh and drop the database.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.stage != "all" and not set(args.stage.split(",")) <= set(STAGES):
        raise SystemExit(f"--stage: all, or a comma-separated list of {', '.join(STAGES)}")
    dataset = load_beir(args.dataset, args.split)
    query_ids = sample_queries(dataset, args.queries)
    say(f"{dataset.name}: {len(dataset.corpus)} documents, {len(query_ids)} {args.split} queries")
    if args.write_corpus:
        write_markdown(dataset, args.write_corpus)
        return 0
    if args.url:
        if not args.corpus:
            raise SystemExit("--url needs --corpus")
        run_gateway(args, dataset, query_ids)
        return 0
    server = os.environ.get("RAGMESH_TEST_POSTGRES_URL", DEFAULT_PG)
    database = args.database or f"ragmesh_eval_{uuid.uuid4().hex[:10]}"
    if args.database:
        try:
            psql(server, f"CREATE DATABASE {database}")
        except Exception:  # noqa: BLE001 - it exists: reuse it (and its index)
            pass
    else:
        psql(server, f"CREATE DATABASE {database}")
    temp = tempfile.TemporaryDirectory(prefix="ragmesh-eval-")
    state = args.state_dir or Path(temp.name) / "state"
    # Under a kept state dir the corpus path stays the same, so a rerun's index ci reuses the build.
    corpus_dir = (args.state_dir.parent if args.state_dir else Path(temp.name)) / f"corpus-{dataset.name}"
    names = write_markdown(dataset, corpus_dir)
    titles = {doc_id: title for doc_id, (title, _) in dataset.corpus.items()}
    library = "".join(c for c in dataset.name.lower() if c.isalnum()) or "eval"
    mesh = EvalMesh(state, database_url(server, database))
    try:
        mesh.start("hybrid")
        index_reply = index_corpus(mesh, corpus_dir, library)
        querier = Querier(mesh, f"{library}@eval", names, titles)
        asyncio.run(run_stages(args, mesh, querier, dataset, query_ids, effective_config(args, index_reply)))
    finally:
        mesh.stop()
        if not args.database:
            drop_database(server, database)
        temp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
