"""Search cost of the embedded store as a collection grows: 10k, 100k, 1M chunks built from a real set.

    .venv/bin/python bench/scale.py [--chunks 10000,100000,1000000] [--clients 1,16] [--queries 200]
        [--base 3000] [--derive mix|noise] [--noise SIGMA] [--ef 128,256] [--work-dir DIR] [--exact]
        [--quantization none|int8] [--smoke]

How the N chunks are made (nothing here is random text or random vectors):
1. SciFact's corpus becomes Markdown files (libs/ragmesh_bench/beir_dataset.py) that the indexer's own scanner
   and chunker cut into its 16,041 chunks; ``--base`` of them, evenly spaced, are embedded once with
   the CPU runtime's MiniLM encoder (in-process, the runtime's pinned model; cached under
   ``--cache-dir``), and SciFact's test queries likewise;
2. chunk ``j`` of a collection is base chunk ``b = j mod base``: its text, title and payload (so its
   BM25 vector is the base chunk's, from the indexer's LexicalEncoder over the writer's
   ``lexical_text``), a fresh chunk id, and a dense vector that is the base vector itself for the
   first ``base`` chunks and after that derived from real vectors (seeded per batch, so any batch
   can be made again for the exact ground truth), by ``--derive``:
   - ``mix`` (the default): ``normalise((1 - w) * v_b + w * v_c + sigma * g)``, a mixture of two
     real chunks' vectors: ``c`` another base chunk, ``w`` uniform in [0, 0.5), ``g`` standard
     Gaussian noise at ``sigma`` = ``--noise`` (default 0.002 for ``mix``) per dimension. The
     copies of one base chunk spread along the directions of other real chunks, as a corpus's
     related passages do;
   - ``noise`` (session 21's): ``normalise(v_b + lam * v_c + sigma * g)``, ``lam`` uniform in
     [0, 0.5), ``sigma`` default 0.02: the isotropic noise (norm ~0.39 in 384 dimensions) is most of
     what tells one copy of a base chunk from another, so at 1M (333 copies of each of 3,000 base
     chunks) a query's exact top 10 is 10 of hundreds of copies whose scores differ by that noise
     alone (docs/performance.md);
3. the collection is written through the vector-store port (EdgeVectorStore, the embedded default)
   with the indexer writer's ``collection_meta`` and ``stored_point`` in the writer's batches of
   256, its alias set (which starts the HNSW build on a collection of at least
   ``RAGMESH_VECTOR_HNSW_MIN_POINTS``), and ``build_index`` awaited: ``build_s`` covers all of it;
4. searches are the HybridQuery the retriever sends (ACL filter, dense + BM25 candidates 50, RRF,
   top 10), ``clients`` concurrent callers each sending its next query when answered;
   ``recall_at_10``: the store's dense top 10 against the exact top 10 that numpy computes over the
   very same vectors.
One JSON line per (chunks, clients): p50_ms, p99_ms, qps, recall_at_10, rss_mb (this process,
engine included), disk_mb (the store folder as allocated), build_s; plus the 1-minute load.
``--exact`` keeps every collection exact (the crossover measurement). The CollectionWriter itself is
not used: it keeps every text, BM25 vector and dense vector of a build in Python lists, ~5 GB at 1M
chunks, more than the shared machine this ran on could spare (docs/performance.md).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import msgspec
import numpy as np

from ragmesh_bench.beir_dataset import load_beir, write_markdown

from ragmesh_common.embedders.identity import EmbedderIdentity
from ragmesh_common.index_schema import alias_name, collection_name
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.vectorstore.edge import EdgeVectorStore
from ragmesh_common.vectorstore.index_config import VectorIndexConfig, load_index_config
from ragmesh_common.vectorstore.port import HybridQuery, PointFilter, SparseVector
from ragmesh_indexer.domain import ChunkingConfig, ScanConfig, chunk_document, scan_corpus
from ragmesh_indexer.registry import CorpusSpec
from ragmesh_indexer.writing import collection_meta, embedding_text, lexical_text, stored_point

SCIFACT = Path("/work/shared/datasets/scifact")
CORPUS = "scifact-scale"
TOP_K = 10
CANDIDATES = 50
BATCH = 256  # the indexer's RAGMESH_INDEXER_UPSERT_BATCH default
DIM = 384
# --derive: its default noise sigma per dimension
DERIVATIONS = {"mix": 0.002, "noise": 0.02}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--chunks", default="10000,100000,1000000", help="comma-separated collection sizes")
    p.add_argument("--clients", default="1,16", help="comma-separated concurrent clients")
    p.add_argument("--queries", type=int, default=200, help="SciFact test queries per pass")
    p.add_argument("--base", type=int, default=3000, help="real chunks embedded; the rest derive from them")
    p.add_argument("--derive", choices=tuple(DERIVATIONS), default="mix",
                   help="how derived vectors are made from the real ones (mix: two real chunks' vectors mixed; "
                        "noise: session 21's isotropic noise)")
    p.add_argument("--noise", type=float, default=None,
                   help="Gaussian sigma per dimension of derived vectors (default: 0.002 for mix, 0.02 for noise)")
    p.add_argument("--dataset", type=Path, default=SCIFACT)
    p.add_argument("--work-dir", type=Path, default=None, help="where collections are built (default: a temp dir)")
    p.add_argument("--cache-dir", type=Path, default=Path(".ragmesh-state/bench-scale"))
    p.add_argument("--vectors-from", type=Path, default=None, metavar="NPZ",
                   help="a runtime's vector cache (e.g. the runtime-vectors.npz bench/eval_retrieval.py's --state-dir "
                        "keeps): base chunks and queries it holds are not embedded again")
    p.add_argument("--exact", action="store_true", help="never build HNSW (exact search at every size)")
    p.add_argument("--quantization", choices=("none", "int8"), default=None,
                   help="override RAGMESH_VECTOR_QUANTIZATION")
    p.add_argument("--ef", default="", help="comma-separated RAGMESH_VECTOR_HNSW_EF values to measure on each "
                   "collection (default: the setting's one)")
    p.add_argument("--keep", action="store_true", help="keep the collections' folders")
    p.add_argument("--reuse", action="store_true",
                   help="search the collections an earlier --keep run left in --work-dir (same --base, --derive, "
                        "--noise) instead of building them again: its build figures are repeated, reused: true")
    p.add_argument("--smoke", action="store_true", help="a tiny pass (2,000 chunks, HNSW from 500) in seconds")
    args = p.parse_args(argv)
    if args.noise is None:
        args.noise = DERIVATIONS[args.derive]
    if args.reuse and not (args.work_dir and args.keep):
        p.error("--reuse needs the --work-dir of a --keep run, and --keep")
    if args.smoke:
        args.chunks, args.clients, args.queries, args.base, args.ef = "2000", "1,4", 12, 48, "64,128"
    return args


# --- the real set -----------------------------------------------------------------------------

class BaseSet(msgspec.Struct):
    spec: CorpusSpec
    chunks: list  # (article, chunk, parent) of the embedded base chunks
    vectors: np.ndarray  # base x DIM, unit rows
    sparse: list  # the base chunks' BM25 vectors
    avg_len: float
    queries: list[str]
    query_vectors: np.ndarray
    query_sparse: list
    identity: EmbedderIdentity


def load_base(args: argparse.Namespace) -> BaseSet:
    dataset = load_beir(args.dataset, "test")
    with tempfile.TemporaryDirectory() as folder:
        write_markdown(dataset, Path(folder))
        scan = scan_corpus(folder, ScanConfig())
        config = ChunkingConfig(strategy="heading", max_chars=600, min_chars=300, max_atomic_chars=4000)
        articles = [chunk_document(doc, corpus=CORPUS, config=config) for doc in scan.documents]
    every = [(a, c, {p.parent_id: p for p in a.parents}.get(c.parent_id)) for a in articles for c in a.chunks]
    step = max(1, len(every) // args.base)
    chosen = every[::step][:args.base]
    queries = [dataset.queries[q] for q in sorted(dataset.queries)][:args.queries]
    texts = [lexical_text(a, c) for a, c, _ in chosen]
    vectors, query_vectors, identity = embed_cached(args.cache_dir, [embedding_text(a, c) for a, c, _ in chosen],
                                                    queries, args.vectors_from)
    lexical = LexicalEncoder()
    sparse, avg_len = lexical.encode_documents(texts)
    spec = CorpusSpec(id=CORPUS, library="scifact", version="scale", root=str(args.dataset))
    return BaseSet(spec=spec, chunks=chosen, vectors=vectors, sparse=sparse, avg_len=avg_len, queries=queries,
                   query_vectors=query_vectors, query_sparse=[lexical.encode_query(q) for q in queries],
                   identity=identity)


def embed_cached(cache_dir: Path, texts: list[str], queries: list[str], runtime_cache: Path | None = None
                 ) -> tuple[np.ndarray, np.ndarray, EmbedderIdentity]:
    """The runtime's MiniLM vectors of the texts and queries, computed once per set of texts.

    ``runtime_cache``: a runtime's vector cache file, loaded into the encoder's own cache first: a
    text it holds is the vector that runtime computed for the same model input (the cache is keyed
    by the exact token ids), so only the others run through the model."""
    from ragmesh_runtime.encoder import MiniLmEncoder
    from ragmesh_runtime.model_files import MINILM_ONNX, MINILM_TOKENIZER

    identity = EmbedderIdentity(model="all-MiniLM-L6-v2-onnx-int8", revision=MINILM_ONNX.sha256, dtype="int8",
                                pooling="mean", format="onnx", dimension=DIM, normalization="l2")
    key = hashlib.sha256(json.dumps([identity.revision, texts, queries]).encode()).hexdigest()[:16]
    cache = cache_dir / f"base-{len(texts)}-{key}.npz"
    if cache.exists():
        saved = np.load(cache)
        return saved["docs"], saved["queries"], identity
    encoder = MiniLmEncoder.load(MINILM_ONNX.path(), MINILM_TOKENIZER.path(), threads=2,
                                 cache_entries=len(texts) + len(queries) + (1 << 16))
    loaded = encoder.cache.load(runtime_cache, MINILM_ONNX.sha256) if runtime_cache else 0
    hits_before = encoder.cache.hits
    started = time.perf_counter()
    docs = encoder.embed(texts).astype(np.float32)
    asked = encoder.embed(queries).astype(np.float32)
    print(json.dumps({"bench": "scale", "kind": "embedded", "texts": len(texts), "queries": len(queries),
                      "from_runtime_cache": encoder.cache.hits - hits_before, "runtime_cache_entries": loaded,
                      "seconds": round(time.perf_counter() - started, 1)}), flush=True)
    cache_dir.mkdir(parents=True, exist_ok=True)
    np.savez(cache, docs=docs, queries=asked)
    return docs, asked, identity


# --- derived chunks ---------------------------------------------------------------------------

class Derivation(msgspec.Struct, frozen=True):
    """How the vectors of chunks past the base are made from the real ones (--derive, --noise)."""

    kind: str  # a key of DERIVATIONS
    noise: float

    def vectors(self, base: np.ndarray, start: int, count: int) -> np.ndarray:
        """Vectors of chunks start..start+count (start a multiple of BATCH), the same on every call."""
        size = len(base)
        out = np.empty((count, DIM), dtype=np.float32)
        for offset in range(0, count, BATCH):
            first = start + offset
            rows = np.arange(first, min(first + BATCH, start + count))
            rng = np.random.default_rng([7, first // BATCH])
            share = rng.uniform(0, 0.5, (len(rows), 1)).astype(np.float32)
            other = base[rng.integers(0, size, len(rows))]
            own = base[rows % size] * (1 - share) if self.kind == "mix" else base[rows % size]
            mixed = own + share * other + self.noise * rng.standard_normal((len(rows), DIM), dtype=np.float32)
            mixed[rows < size] = base[rows[rows < size]]
            out[offset:offset + len(rows)] = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)
        return out


def chunk_uuid(j: int) -> str:
    return str(uuid.UUID(int=(0x5CA1E << 100) + j))


def points_for(base: BaseSet, start: int, vectors: np.ndarray) -> list:
    points = []
    for offset, vector in enumerate(vectors):
        j = start + offset
        article, chunk, parent = base.chunks[j % len(base.chunks)]
        chunk = msgspec.structs.replace(chunk, chunk_id=chunk_uuid(j))
        points.append(stored_point(base.spec, article, chunk, parent, vector.tolist(),
                                   base.sparse[j % len(base.chunks)]))
    return points


def exact_top(base: np.ndarray, n: int, queries: np.ndarray, derivation: Derivation) -> list[list[str]]:
    """The exact dense top 10 of each query over the n chunks (numpy, a block at a time)."""
    best_scores = np.full((len(queries), TOP_K), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), TOP_K), dtype=np.int64)
    block = 64 * BATCH
    for start in range(0, n, block):
        scores = queries @ derivation.vectors(base, start, min(block, n - start)).T
        ids = np.broadcast_to(np.arange(start, start + scores.shape[1]), scores.shape)
        scores = np.concatenate([best_scores, scores], axis=1)
        ids = np.concatenate([best_ids, ids], axis=1)
        keep = np.argsort(-scores, axis=1, kind="stable")[:, :TOP_K]
        best_scores, best_ids = np.take_along_axis(scores, keep, 1), np.take_along_axis(ids, keep, 1)
    return [[chunk_uuid(int(j)) for j in row] for row in best_ids]


# --- one collection ---------------------------------------------------------------------------

BUILD_RECORD = "scale-build.json"  # how a kept collection was made, and its build figures


def kept_build(folder: Path, made: dict) -> dict | None:
    """The build figures of the collection a --keep run left in ``folder``, when it was made as
    ``made`` says (chunks, base, derivation); None when there is none to reuse."""
    record = folder / BUILD_RECORD
    if not record.exists():
        return None
    saved = json.loads(record.read_text())
    if any(saved.get(key) != value for key, value in made.items()):
        return None
    return {**{key: value for key, value in saved.items() if key not in made}, "reused": True}


async def build(store: EdgeVectorStore, base: BaseSet, n: int, derivation: Derivation) -> tuple[str, dict]:
    version = f"n{n}"
    name = collection_name(CORPUS, version)
    started = time.perf_counter()
    await store.create_collection(name, DIM, collection_meta(
        base.spec, version, base.identity.model, base.identity, LexicalEncoder(), base.avg_len, n, n))
    for start in range(0, n, BATCH):
        vectors = derivation.vectors(base.vectors, start, min(BATCH, n - start))
        await store.upsert(name, points_for(base, start, vectors))
    upserted = time.perf_counter()
    await store.set_alias(alias_name(CORPUS), name)  # as a promotion does: starts the graph build
    indexed = await store.build_index(name)
    done = time.perf_counter()
    return name, {"build_s": round(done - started, 1), "upsert_s": round(upserted - started, 1),
                  "index_s": round(done - upserted, 1), "hnsw": indexed}


async def recall(store: EdgeVectorStore, name: str, base: BaseSet, truth: list[list[str]]) -> float:
    found = 0
    for vector, expected in zip(base.query_vectors, truth):
        hits = await store.hybrid_query(HybridQuery(collection=name, filter=PointFilter(corpora=(CORPUS,)),
                                                    limit=TOP_K, dense=vector.tolist(), candidates=CANDIDATES))
        found += len({h.id for h in hits} & set(expected))
    return round(found / (TOP_K * len(truth)), 4)


async def search_pass(store: EdgeVectorStore, name: str, base: BaseSet, clients: int) -> dict:
    queries = [HybridQuery(collection=name, filter=PointFilter(corpora=(CORPUS,)), limit=TOP_K,
                           dense=v.tolist(), sparse=SparseVector(s.indices, s.values), candidates=CANDIDATES)
               for v, s in zip(base.query_vectors, base.query_sparse)]
    for query in queries[:5]:  # warm the engine's pages
        await store.hybrid_query(query)
    pending = iter(queries)
    latencies: list[float] = []

    async def client() -> None:
        for query in pending:
            started = time.perf_counter()
            hits = await store.hybrid_query(query)
            latencies.append(time.perf_counter() - started)
            if not hits:
                raise SystemExit("bench/scale.py: a search returned nothing; the store's API changed")

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    wall = time.perf_counter() - started
    ms = np.asarray(latencies) * 1000
    return {"p50_ms": round(float(np.percentile(ms, 50)), 2), "p99_ms": round(float(np.percentile(ms, 99)), 2),
            "qps": round(len(ms) / wall, 1)}


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def disk_mb(folder: Path) -> float:
    out = subprocess.run(["du", "-sk", str(folder)], capture_output=True, text=True, check=True).stdout
    return round(int(out.split()[0]) / 1024, 1)


def index_config(args: argparse.Namespace) -> VectorIndexConfig:
    config = load_index_config("bench")
    if args.quantization is not None:
        config = msgspec.structs.replace(config, quantization=args.quantization)
    if args.smoke:
        config = msgspec.structs.replace(config, hnsw_min_points=500, min_free_mb=64)
    if args.exact:
        config = msgspec.structs.replace(config, hnsw_min_points=2**62)
    return config


async def main_async(args: argparse.Namespace) -> int:
    sizes = [int(x) for x in args.chunks.split(",") if x]
    clients = [int(x) for x in args.clients.split(",") if x]
    config = index_config(args)
    base = load_base(args)
    derivation = Derivation(args.derive, args.noise)
    work = args.work_dir or Path(tempfile.mkdtemp(prefix="ragmesh-scale-"))
    print(json.dumps({"bench": "scale", "kind": "config", "base_chunks": len(base.chunks), "queries": len(base.queries),
                      "derive": derivation.kind, "noise": derivation.noise,
                      "cos_derived_to_base": round(float(np.mean(np.sum(
                          derivation.vectors(base.vectors, len(base.chunks), BATCH)
                          * base.vectors[np.arange(len(base.chunks), len(base.chunks) + BATCH) % len(base.chunks)],
                          axis=1))), 3),
                      "store": "qdrant-edge", "index": msgspec.to_builtins(config), "work_dir": str(work),
                      "cpus": os.cpu_count()}), flush=True)
    for n in sizes:
        folder = work / f"n{n}"
        made = {"chunks": n, "base_chunks": len(base.chunks), **msgspec.to_builtins(derivation)}
        built = kept_build(folder, made) if args.reuse else None
        if built is None:
            shutil.rmtree(folder, ignore_errors=True)
        before = rss_mb()
        store = EdgeVectorStore(folder, config)
        try:
            if built is None:
                name, built = await build(store, base, n, derivation)
                (folder / BUILD_RECORD).write_text(json.dumps({**made, **built}))
            else:
                name = collection_name(CORPUS, f"n{n}")
            truth = exact_top(base.vectors, n, base.query_vectors, derivation)
            for ef in [int(x) for x in args.ef.split(",") if x] or [config.hnsw_ef]:
                store.config = msgspec.structs.replace(config, hnsw_ef=ef)  # read at each query
                recall_at_10 = await recall(store, name, base, truth)
                for count in clients:
                    measured = await search_pass(store, name, base, count)
                    print(json.dumps({"bench": "scale", "chunks": n, "clients": count, **measured,
                                      "recall_at_10": recall_at_10, "ef": ef, "rss_mb": rss_mb(),
                                      "rss_before_mb": before, "disk_mb": disk_mb(folder), **built,
                                      "load_1m": round(os.getloadavg()[0], 2)}), flush=True)
        finally:
            await store.close()
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
    if args.work_dir is None and not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(main_async(parse_args(argv)))


if __name__ == "__main__":
    raise SystemExit(main())
