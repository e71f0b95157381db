"""The pieces every bench smoke pass is built from (libs/ragmesh_bench/smoke.py)."""

from __future__ import annotations

import argparse
import json

import pytest

from ragmesh_bench.harness import RunningMesh
from ragmesh_bench.smoke import CANDIDATE_KEYS, parse_args, tiny_answer_set, tiny_beir, tiny_candidates


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", required=True)
    return p


def test_smoke_makes_required_options_optional_and_only_then() -> None:
    assert parse_args(parser(), ["--smoke"]).smoke is True
    assert parse_args(parser(), ["--dataset", "d"]).smoke is False
    with pytest.raises(SystemExit):
        parse_args(parser(), [])


def test_tiny_beir_qrels_name_documents_of_its_corpus(tmp_path) -> None:
    folder = tiny_beir(tmp_path / "beir")
    docs = {json.loads(line)["_id"] for line in (folder / "corpus.jsonl").read_text().splitlines()}
    queries = {json.loads(line)["_id"] for line in (folder / "queries.jsonl").read_text().splitlines()}
    for split in ("train", "validation", "dev", "test"):
        rows = [line.split("\t") for line in (folder / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]]
        assert rows and {q for q, _, _ in rows} == queries and {d for _, d, _ in rows} <= docs
    hits = [json.loads(line)["hits"] for line in tiny_candidates(folder).read_text().splitlines()]
    assert len(hits) == len(queries) and all(set(CANDIDATE_KEYS) <= set(h) for row in hits for h in row)


def test_every_gold_answer_stands_in_the_file_it_names(tmp_path) -> None:
    folder = tiny_answer_set(tmp_path / "answers")
    rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines()]
    assert any(not r["answerable"] for r in rows)
    for row in (r for r in rows if r["answerable"]):
        text = (folder / "corpus" / row["file"]).read_text().lower()
        assert all(gold.lower() in text for gold in row["answers"]), row


def test_a_smoke_pass_without_a_mesh_says_which_variables_to_set() -> None:
    with pytest.raises(SystemExit, match="RAGMESH_URL"):
        RunningMesh.from_env({})
