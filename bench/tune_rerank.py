"""Tune the runtime's "blend" rerank weights on TRAIN candidates (never on test).

    .venv/bin/python bench/eval_retrieval.py --dataset /work/shared/datasets/scifact --split train \
        --queries 200 --stage hybrid --dump /tmp/train-hybrid.jsonl
    .venv/bin/python bench/tune_rerank.py --dataset /work/shared/datasets/scifact --split train \
        --candidates /tmp/train-hybrid.jsonl [--text quote|titled]

Scores every dumped candidate once per signal with the runtime's own code (WordLlama, request
BM25 from ragmesh_runtime.relevance) on the text the rerank stage sends, then grid-searches the
z-score weights for nDCG@10 (pytrec_eval) and prints one JSON line: each signal alone, the hybrid
order, and the best weights (as RAGMESH_RUNTIME_RERANK_BLEND_* values).

The MiniLM signal is, by default (``--minilm dense``), the cosine retrieval returned for the hit:
with ``--rerank-text embedded`` and 254-token rerank windows the runtime scores exactly that
vector pair (its cache holds the indexer's vectors), so nothing needs recomputing. ``--minilm
window`` recomputes the windowed cosine in-process instead (slow on 2 cores).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from beir_dataset import doc_run, evaluate, load_beir  # noqa: E402

GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", required=True, type=Path)
    p.add_argument("--split", default="train")
    p.add_argument("--candidates", required=True, type=Path, help="JSONL from eval_retrieval.py --dump")
    p.add_argument("--text", default="embedded", choices=("quote", "embedded"), help="what the rerank stage sends")
    p.add_argument("--minilm", default="dense", choices=("dense", "window"))
    args = p.parse_args()
    if args.split == "test":
        raise SystemExit("tune on train only")

    from ragmesh_runtime.models import load_models
    from ragmesh_runtime.relevance import MiniLmWindowScorer, RequestBm25Scorer, standardised
    from ragmesh_runtime.settings import RerankSettings, RuntimeSettings

    dataset = load_beir(args.dataset, args.split)
    rows = [json.loads(line) for line in args.candidates.read_text(encoding="utf-8").splitlines() if line.strip()]
    settings = RuntimeSettings(rerank=RerankSettings(method="blend"))
    models = load_models(settings)
    r = settings.rerank
    window = MiniLmWindowScorer(models.encoder, r.window_tokens, r.window_stride, r.max_windows)
    bm25 = RequestBm25Scorer()
    scored = []
    for number, row in enumerate(rows, 1):
        texts = [h[args.text] for h in row["hits"]]
        if not texts:
            continue
        if args.minilm == "dense":
            minilm = np.array([h["dense"] if h["dense"] is not None else -1.0 for h in row["hits"]])
        else:
            minilm = window.score(row["query"], texts, True)
        z = {"minilm": standardised(minilm), "bm25": standardised(bm25.score(row["query"], texts, True))}
        z["wordllama"] = standardised(models.wordllama.cosine_to_query(row["query"], texts))
        scored.append((row["qid"], [h["doc"] for h in row["hits"]], z))
        if number % 25 == 0:
            print(f"tune: scored {number}/{len(rows)}", file=sys.stderr, flush=True)

    def ndcg(weights: dict[str, float]) -> float:
        run = {}
        for qid, docs, z in scored:
            total = sum(w * z[name] for name, w in weights.items())
            order = np.argsort(-total, kind="stable")
            run[qid] = doc_run([docs[i] for i in order])
        return evaluate(dataset.qrels, run)["ndcg@10"]

    hybrid = evaluate(dataset.qrels, {qid: doc_run(docs) for qid, docs, _ in scored})["ndcg@10"]
    alone = {name: ndcg({name: 1.0}) for name in ("minilm", "wordllama", "bm25")}
    best = (-1.0, {})
    for wm, ww, wb in itertools.product(GRID, GRID, GRID):
        if wm == ww == wb == 0.0 or 1.0 not in (wm, ww, wb):
            continue  # scale-free: one weight fixed at 1 covers every ratio in the grid
        weights = {"minilm": wm, "wordllama": ww, "bm25": wb}
        value = ndcg(weights)
        if value > best[0]:
            best = (value, weights)
    print(json.dumps({"dataset": dataset.name, "split": args.split, "queries": len(scored), "text": args.text,
                      "minilm": args.minilm,
                      "hybrid_ndcg@10": hybrid, "alone_ndcg@10": alone, "best_ndcg@10": best[0],
                      "best_weights": best[1]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
