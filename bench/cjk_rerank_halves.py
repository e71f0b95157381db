"""The e5 weight for Chinese queries, chosen on one half of XQuAD-zh and checked on the other.

    .venv/bin/python bench/eval_retrieval.py --dataset /work/shared/datasets/xquad-zh --split validation \
        --stage hybrid --dump /tmp/xquad-hybrid.jsonl
    .venv/bin/python bench/cjk_rerank_halves.py --dataset /work/shared/datasets/xquad-zh \
        --candidates /tmp/xquad-hybrid.jsonl

XQuAD-zh has one split, so nothing may be tuned on all of it: queries are split in two by a hash
of their id (half A even, half B odd). Over the dumped hybrid candidates it scores what the mesh
computes for a Chinese query, z(z(request BM25) + w x z(e5 cosine)) + 0.25 x z(collection BM25)
(the runtime's blend, then the rerank service's fusion; MiniLM and the dense prior sit Chinese
queries out), for each e5 weight w, with the runtime's own scorers, and prints one JSON line:
nDCG@10 (pytrec_eval) per half and overall. Pick w on half A; half B is the check.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import numpy as np

from ragmesh_bench.beir_dataset import doc_run, evaluate, load_beir
from ragmesh_bench.smoke import parse_args, tiny_beir, tiny_candidates

WEIGHTS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
PRIOR_SPARSE = 0.25  # the rerank service's default


def half(qid: str) -> str:
    return "A" if int(hashlib.sha1(qid.encode()).hexdigest(), 16) % 2 == 0 else "B"


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", required=True, type=Path)
    p.add_argument("--split", default="validation")
    p.add_argument("--candidates", required=True, type=Path, help="JSONL from eval_retrieval.py --dump")
    args = parse_args(p)
    if args.smoke:
        args.dataset = tiny_beir()
        args.candidates = tiny_candidates(args.dataset)

    from ragmesh_common.scoring import standardised as z
    from ragmesh_runtime.e5_similarity import E5Similarity
    from ragmesh_runtime.model_files import E5_MODEL, verify
    from ragmesh_runtime.relevance import RequestBm25Scorer

    dataset = load_beir(args.dataset, args.split)
    rows = [json.loads(line) for line in args.candidates.read_text(encoding="utf-8").splitlines() if line.strip()]
    model = verify(E5_MODEL)
    e5 = E5Similarity.load(model.path, model.sha256, threads=2, cache_entries=100_000)
    bm25 = RequestBm25Scorer()
    scored = []
    for number, row in enumerate(rows, 1):
        hits = row["hits"]
        if len(hits) < 2:
            continue
        texts = [h["embedded"] for h in hits]
        scored.append((row["qid"], [h["doc"] for h in hits], {
            "bm25": z(bm25.score(row["query"], texts, True)),
            "e5": z(e5.cosine_to_query(row["query"], texts)),
            "sparse": z(np.array([h.get("sparse") or 0.0 for h in hits])),
        }))
        if number % 200 == 0:
            print(f"scored {number}/{len(rows)}", file=sys.stderr, flush=True)

    def ndcg(weight: float, which: str) -> float:
        run = {}
        for qid, docs, s in scored:
            if which in ("A", "B") and half(qid) != which:
                continue
            total = z(s["bm25"] + weight * s["e5"]) + PRIOR_SPARSE * s["sparse"]
            run[qid] = doc_run([docs[i] for i in np.argsort(-total, kind="stable")])
        return round(evaluate({q: r for q, r in dataset.qrels.items() if q in run}, run)["ndcg@10"], 4)

    print(json.dumps({"dataset": dataset.name, "queries": len(scored), "ndcg@10": {
        str(w): {"A": ndcg(w, "A"), "B": ndcg(w, "B"), "all": ndcg(w, "all")} for w in WEIGHTS}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
