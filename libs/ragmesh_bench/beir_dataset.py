"""A BEIR folder (corpus, queries, qrels) as the eval harness needs it, and the standard metrics.

Metrics come from pytrec_eval (the trec_eval code), never from hand-written formulas: nDCG@10
(``ndcg_cut_10``), Recall@20 (``recall_20``), and MRR@10 (``recip_rank`` over a run cut to its
first 10 documents, since trec_eval's reciprocal rank has no cutoff of its own).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import pytrec_eval

_SAFE_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")


@dataclass(frozen=True)
class BeirDataset:
    name: str
    corpus: dict[str, tuple[str, str]]  # doc id -> (title, text)
    queries: dict[str, str]  # query id -> text, only those with qrels in the split
    qrels: dict[str, dict[str, int]]  # query id -> {doc id: relevance}


def load_beir(folder: Path, split: str) -> BeirDataset:
    corpus_file = folder / "corpus.jsonl"
    opener = open
    if not corpus_file.exists():
        corpus_file, opener = folder / "corpus.jsonl.gz", gzip.open
    corpus: dict[str, tuple[str, str]] = {}
    with opener(corpus_file, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                doc = json.loads(line)
                corpus[str(doc["_id"])] = (doc.get("title") or "", doc.get("text") or "")
    qrels: dict[str, dict[str, int]] = {}
    with open(folder / "qrels" / f"{split}.tsv", encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            parts = line.rstrip("\n").split("\t")
            if number == 0 and not parts[-1].lstrip("-").isdigit():
                continue  # the header row
            query_id, doc_id, score = parts[0], parts[1], int(parts[2])
            qrels.setdefault(query_id, {})[doc_id] = score
    queries: dict[str, str] = {}
    with open(folder / "queries.jsonl", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                query = json.loads(line)
                if str(query["_id"]) in qrels:
                    queries[str(query["_id"])] = query["text"]
    qrels = {q: rel for q, rel in qrels.items() if q in queries}
    return BeirDataset(folder.name, corpus, queries, qrels)


def sample_queries(dataset: BeirDataset, limit: int, seed: int = 13) -> list[str]:
    """Query ids in a fixed order: all of them, or a seeded sample of ``limit``."""
    ids = sorted(dataset.queries)
    if 0 < limit < len(ids):
        ids = sorted(random.Random(seed).sample(ids, limit))
    return ids


def file_name(doc_id: str) -> str:
    """A file name for a doc id; ids that are not plain names are hashed (the harness keeps the map)."""
    if _SAFE_NAME.match(doc_id):
        return f"{doc_id}.md"
    return f"{hashlib.sha256(doc_id.encode()).hexdigest()[:32]}.md"


def write_markdown(dataset: BeirDataset, folder: Path) -> dict[str, str]:
    """One Markdown file per document: the title as a # heading, the text as the body.
    Returns file name -> doc id (the harness maps each hit's source_path back through it)."""
    folder.mkdir(parents=True, exist_ok=True)
    names: dict[str, str] = {}
    for doc_id, (title, text) in dataset.corpus.items():
        name = file_name(doc_id)
        if name in names:
            raise ValueError(f"two documents map to the file {name}")
        names[name] = doc_id
        title = " ".join(title.split())
        body = text.strip()
        (folder / name).write_text(f"# {title}\n\n{body}\n" if title else f"{body}\n", encoding="utf-8")
    return names


def evaluate(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]) -> dict[str, float]:
    """Mean nDCG@10, Recall@20 and MRR@10 over the queries of ``run`` (a query with no hits scores 0)."""
    qrels = {q: qrels[q] for q in run}
    full = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.20"}).evaluate(
        {q: docs or {"__none__": 0.0} for q, docs in run.items()})
    top10 = {q: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:10]) or {"__none__": 0.0} for q, docs in run.items()}
    mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    count = max(1, len(run))
    return {
        "ndcg@10": round(sum(v["ndcg_cut_10"] for v in full.values()) / count, 4),
        "recall@20": round(sum(v["recall_20"] for v in full.values()) / count, 4),
        "mrr@10": round(sum(v["recip_rank"] for v in mrr.values()) / count, 4),
    }


def doc_run(ranked_doc_ids: list[str]) -> dict[str, float]:
    """A document's score is its best chunk's: the first rank at which any of its chunks appears."""
    scores: dict[str, float] = {}
    for rank, doc_id in enumerate(ranked_doc_ids):
        scores.setdefault(doc_id, float(len(ranked_doc_ids) - rank))
    return scores
