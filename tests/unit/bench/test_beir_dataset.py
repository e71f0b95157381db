"""The eval harness's dataset loading, file naming and metric plumbing (libs/ragmesh_bench/beir_dataset.py)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from ragmesh_bench.beir_dataset import doc_run, evaluate, file_name, load_beir, sample_queries, write_markdown


@pytest.fixture
def beir(tmp_path: Path) -> Path:
    docs = [{"_id": "d1", "title": "Vitamin  D", "text": "Bone density."}, {"_id": "a/b c", "title": "", "text": "x"}]
    with gzip.open(tmp_path / "corpus.jsonl.gz", "wt", encoding="utf-8") as handle:
        handle.writelines(json.dumps(d) + "\n" for d in docs)
    (tmp_path / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q, "text": f"query {q}"}) + "\n" for q in ("q1", "q2", "q3")), encoding="utf-8")
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\ta/b c\t1\n")
    return tmp_path


def test_loads_gzipped_corpus_and_only_queries_with_qrels(beir: Path) -> None:
    dataset = load_beir(beir, "test")
    assert set(dataset.corpus) == {"d1", "a/b c"}
    assert set(dataset.queries) == {"q1", "q2"}
    assert dataset.qrels == {"q1": {"d1": 1}, "q2": {"a/b c": 1}}
    assert sample_queries(dataset, 0) == ["q1", "q2"]
    assert len(sample_queries(dataset, 1)) == 1


def test_markdown_files_map_back_to_doc_ids(beir: Path, tmp_path: Path) -> None:
    names = write_markdown(load_beir(beir, "test"), tmp_path / "md")
    assert names[file_name("d1")] == "d1" and names[file_name("a/b c")] == "a/b c"
    assert "/" not in file_name("a/b c")
    assert (tmp_path / "md" / "d1.md").read_text() == "# Vitamin D\n\nBone density.\n"
    assert (tmp_path / "md" / file_name("a/b c")).read_text() == "x\n"


def test_a_document_scores_its_best_chunk() -> None:
    run = doc_run(["d2", "d1", "d2", "d3"])
    assert run["d2"] > run["d1"] > run["d3"]


def test_metrics_come_from_trec_eval() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d9": 1}}
    # q1 finds its document at rank 2; q2 finds nothing relevant (and an empty run counts as 0).
    perfect_second = evaluate(qrels, {"q1": doc_run(["d5", "d1"]), "q2": {}})
    assert perfect_second["mrr@10"] == pytest.approx(0.25)  # (1/2 + 0) / 2
    assert perfect_second["recall@20"] == pytest.approx(0.5)
    assert perfect_second["ndcg@10"] == pytest.approx((1 / 1.5849625) / 2, abs=1e-4)
    # MRR@10: a hit at rank 11 does not count.
    late = evaluate({"q1": {"d1": 1}}, {"q1": doc_run([f"x{i}" for i in range(10)] + ["d1"])})
    assert late["mrr@10"] == 0.0 and late["recall@20"] == 1.0
