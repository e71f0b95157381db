"""Tune the rerank weights on TRAIN candidates (never on test).

    .venv/bin/python bench/eval_retrieval.py --dataset /work/shared/datasets/scifact --split train \
        --stage hybrid --dump /tmp/train-hybrid.jsonl
    .venv/bin/python bench/tune_rerank.py --dataset /work/shared/datasets/scifact --split train \
        --candidates /tmp/train-hybrid.jsonl

The final order is what the rerank service computes (ragmesh_rerank.fusion):

    z(runtime /rerank score) + prior_dense x z(dense cosine) + prior_sparse x z(BM25 over the collection)

and the CPU runtime's /rerank score (raw_scores=true) is its "blend":

    minilm x z(windowed MiniLM cosine) + wordllama x z(WordLlama cosine) + bm25 x z(request BM25)

Every dumped candidate is scored once per signal with the runtime's own code (WordLlama and request
BM25 from ragmesh_runtime.relevance) on the text the gateway sends (the text the indexer embedded);
the MiniLM signal is the dense cosine retrieval returned, which is the very vector pair the runtime
scores when a 254-token window covers the embedded text (its cache holds the indexer's vectors).
A grid search picks the weights by nDCG@10 (a vectorised nDCG for the search, pytrec_eval for the
figures printed) and prints one JSON line.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path

import numpy as np

from ragmesh_bench.beir_dataset import doc_run, evaluate, load_beir
from ragmesh_bench.smoke import parse_args, tiny_beir, tiny_candidates

RUNTIME_GRID = (0.0, 0.25, 0.5, 1.0)
PRIOR_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)


class Scored:
    """Per query: candidate documents (best chunk first order kept) and each signal's z-scores."""

    def __init__(self, qid: str, docs: list[str], z: dict[str, np.ndarray], gains: dict[str, float],
                 ideal: float) -> None:
        self.qid, self.docs, self.z, self.ideal = qid, docs, z, ideal
        unique = list(dict.fromkeys(docs))
        self.docs_index = [unique.index(d) for d in docs]
        self.gains = np.array([gains.get(d, 0.0) for d in unique])


def fast_ndcg10(scored: list[Scored], score) -> float:  # noqa: ANN001 - a callable of Scored
    """nDCG@10 over documents (a document scores its best chunk), for the grid search only."""
    total = 0.0
    for s in scored:
        if s.ideal == 0.0:
            continue
        order = np.argsort(-score(s), kind="stable")
        seen: set[int] = set()
        dcg, rank = 0.0, 0
        for i in order:
            doc = s.docs_index[i]
            if doc in seen:
                continue
            seen.add(doc)
            dcg += s.gains[doc] / math.log2(rank + 2)
            rank += 1
            if rank == 10:
                break
        total += dcg / s.ideal
    return total / len(scored)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", required=True, type=Path)
    p.add_argument("--split", default="train")
    p.add_argument("--candidates", required=True, type=Path, help="JSONL from eval_retrieval.py --dump")
    p.add_argument("--text", default="embedded", choices=("quote", "embedded"), help="what the rerank stage sends")
    args = parse_args(p)
    if args.smoke:
        args.dataset = tiny_beir()
        args.candidates = tiny_candidates(args.dataset)
    if args.split == "test":
        raise SystemExit("tune on train only")

    from ragmesh_runtime.models import load_models
    from ragmesh_common.scoring import standardised
    from ragmesh_runtime.relevance import RequestBm25Scorer
    from ragmesh_runtime.settings import RerankSettings, RuntimeSettings

    dataset = load_beir(args.dataset, args.split)
    rows = [json.loads(line) for line in args.candidates.read_text(encoding="utf-8").splitlines() if line.strip()]
    # The blend loads WordLlama only when its weight is not zero; the grid below sets the weights.
    models = load_models(RuntimeSettings(rerank=RerankSettings(method="blend", blend_wordllama=1.0)))
    bm25 = RequestBm25Scorer()
    scored: list[Scored] = []
    for number, row in enumerate(rows, 1):
        hits = row["hits"]
        if not hits:
            continue
        texts = [h[args.text] for h in hits]
        dense = np.array([h["dense"] if h.get("dense") is not None else -1.0 for h in hits])
        sparse = np.array([h.get("sparse") or 0.0 for h in hits])
        z = {
            "dense": standardised(dense),
            "sparse": standardised(sparse),
            "bm25": standardised(bm25.score(row["query"], texts, True)),
            "wordllama": standardised(models.wordllama.cosine_to_query(row["query"], texts)),
        }
        qrels = {d: float(g) for d, g in dataset.qrels.get(row["qid"], {}).items()}
        ideal_gains = sorted((g for g in qrels.values() if g > 0), reverse=True)[:10]
        ideal = sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains))
        scored.append(Scored(row["qid"], [h["doc"] for h in hits], z, qrels, ideal))
        if number % 100 == 0:
            print(f"tune: scored {number}/{len(rows)}", file=sys.stderr, flush=True)

    def runtime(s: Scored, w: dict[str, float]) -> np.ndarray:
        return w["minilm"] * s.z["dense"] + w["wordllama"] * s.z["wordllama"] + w["bm25"] * s.z["bm25"]

    def final(s: Scored, w: dict[str, float]) -> np.ndarray:
        return (standardised(runtime(s, w)) + w["prior_dense"] * s.z["dense"]
                + w["prior_sparse"] * s.z["sparse"])

    def pytrec(w: dict[str, float] | None) -> float:
        run = {}
        for s in scored:
            order = range(len(s.docs)) if w is None else np.argsort(-final(s, w), kind="stable")
            run[s.qid] = doc_run([s.docs[i] for i in order])
        return evaluate(dataset.qrels, run)["ndcg@10"]

    alone = {name: fast_ndcg10(scored, lambda s, n=name: s.z[n]) for name in ("dense", "sparse", "bm25", "wordllama")}
    best = (-1.0, {})
    for wm, ww, wb in itertools.product(RUNTIME_GRID, RUNTIME_GRID, RUNTIME_GRID):
        if wm == ww == wb == 0.0 or 1.0 not in (wm, ww, wb):
            continue  # scale-free inside the runtime: one weight at 1 covers every ratio in the grid
        for pd, ps in itertools.product(PRIOR_GRID, PRIOR_GRID):
            w = {"minilm": wm, "wordllama": ww, "bm25": wb, "prior_dense": pd, "prior_sparse": ps}
            value = fast_ndcg10(scored, lambda s, w=w: final(s, w))
            if value > best[0]:
                best = (value, w)
        print(f"tune: runtime {wm}/{ww}/{wb} done, best so far {best[0]:.4f}", file=sys.stderr, flush=True)
    print(json.dumps({
        "dataset": dataset.name, "split": args.split, "queries": len(scored), "text": args.text,
        "hybrid_ndcg@10": pytrec(None), "alone_ndcg@10_fast": alone,
        "best_ndcg@10": pytrec(best[1]), "best_ndcg@10_fast": best[0], "best_weights": best[1],
    }))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
