"""How well the extractive answerer's threshold separates relevant from unrelated evidence.

For sampled queries of a BEIR dataset, the answerer scores (a) the query's relevant documents and
(b) three random other documents. A good threshold keeps (a) above it and (b) below it.
Prints one JSON line per dataset.

    .venv/bin/python bench/runtime_answer_threshold.py [--queries 120] [--datasets scifact xquad-zh]
"""

from __future__ import annotations

import argparse
import csv
import glob
import gzip
import json
import random
from pathlib import Path

import numpy as np

from ragmesh_bench.smoke import parse_args, tiny_beir
from ragmesh_runtime.generator.extractive import ExtractiveAnswerer
from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt, EvidenceSource
from ragmesh_runtime.models import load_models
from ragmesh_runtime.settings import RuntimeSettings

DATASETS = Path("/work/shared/datasets")


def load_beir(root: Path) -> tuple[dict, dict, dict]:
    corpus_file = root / "corpus.jsonl"
    opener = open if corpus_file.exists() else gzip.open
    corpus_file = corpus_file if corpus_file.exists() else root / "corpus.jsonl.gz"
    with opener(corpus_file, "rt", encoding="utf-8") as handle:
        corpus = {doc["_id"]: doc for doc in map(json.loads, handle)}
    with open(root / "queries.jsonl", encoding="utf-8") as handle:
        queries = {q["_id"]: q["text"] for q in map(json.loads, handle)}
    qrels: dict[str, list[str]] = {}
    for path in glob.glob(str(root / "qrels" / "*.tsv")):
        with open(path, encoding="utf-8") as handle:
            for row in csv.DictReader(handle, delimiter="\t"):
                if int(row["score"]) > 0:
                    qrels.setdefault(row["query-id"], []).append(row["corpus-id"])
    return corpus, queries, qrels


def best_score(answerer: ExtractiveAnswerer, question: str, docs: list[dict]) -> float | None:
    sources = tuple(
        EvidenceSource(f"S{i + 1}", d.get("title", ""), "", d["text"]) for i, d in enumerate(docs)
    )
    candidates = answerer.candidates(EvidencePrompt(sources, question))
    if not candidates:
        return None
    return max(s.score for s in answerer.score(question, candidates))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", type=int, default=120)
    parser.add_argument("--datasets", nargs="+", default=["scifact", "xquad-zh"],
                        help=f"BEIR folders: a path, or a name under {DATASETS}")
    parser.add_argument("--seed", type=int, default=1)
    args = parse_args(parser)
    if args.smoke:
        args.datasets, args.queries = [str(tiny_beir())], 4
    settings = RuntimeSettings()
    answerer = ExtractiveAnswerer(load_models(settings).encoder, settings.generator)
    rng = random.Random(args.seed)
    for name in args.datasets:
        corpus, queries, qrels = load_beir(Path(name) if Path(name).is_dir() else DATASETS / name)
        doc_ids = sorted(corpus)
        query_ids = sorted(q for q in qrels if q in queries)
        rng.shuffle(query_ids)
        relevant, unrelated = [], []
        threshold = None
        for qid in query_ids[: args.queries]:
            question = queries[qid]
            threshold = answerer.threshold(question)
            docs = [corpus[d] for d in qrels[qid] if d in corpus][:2]
            others = [corpus[d] for d in rng.sample(doc_ids, min(3, len(doc_ids))) if d not in qrels[qid]]
            for bucket, evidence in ((relevant, docs), (unrelated, others)):
                score = best_score(answerer, question, evidence)
                if score is not None:
                    bucket.append(score)
        rel, unr = np.array(relevant), np.array(unrelated)
        print(
            json.dumps(
                {
                    "dataset": Path(name).name,
                    "queries": len(rel),
                    "threshold": threshold,
                    "relevant_answered": round(float(np.mean(rel >= threshold)), 3),
                    "unrelated_refused": round(float(np.mean(unr < threshold)), 3),
                    "relevant_best_score_p10_p50": np.percentile(rel, [10, 50]).round(3).tolist(),
                    "unrelated_best_score_p50_p90": np.percentile(unr, [50, 90]).round(3).tolist(),
                }
            )
        )


if __name__ == "__main__":
    main()
