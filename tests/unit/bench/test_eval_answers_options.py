"""bench/eval_answers.py's options: the seeded sample, --generator, and summaries from records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragmesh_bench.answer_set import Outcome, Question, summarize
from ragmesh_bench.harness import bench_script

_script = bench_script("eval_answers")
outcomes_from_records, parse_args, sample_questions = (
    _script.outcomes_from_records, _script.parse_args, _script.sample_questions)


def _questions() -> list[Question]:
    return [Question(f"a{i:02d}", f"q{i}", True, ("x",), f"f{i % 5}") for i in range(30)] + \
           [Question(f"u{i:02d}", f"u{i}", False, (), None) for i in range(10)]


def test_a_sample_is_seeded_and_a_smaller_one_is_part_of_a_larger_one() -> None:
    small, large = sample_questions(_questions(), 4, 2, seed=1), sample_questions(_questions(), 12, 6, seed=1)
    assert [q.id for q in small] == [q.id for q in sample_questions(_questions(), 4, 2, seed=1)]
    assert sum(q.answerable for q in small) == 4 and sum(not q.answerable for q in small) == 2
    assert {q.id for q in small} <= {q.id for q in large}
    assert {q.id for q in sample_questions(_questions(), 4, 2, seed=2)} != {q.id for q in small}


def test_a_sample_larger_than_its_pool_is_refused() -> None:
    with pytest.raises(SystemExit, match="pool of 10"):
        sample_questions(_questions(), 4, 11, seed=1)


def test_options() -> None:
    args = parse_args(["--dataset", "d", "--sample", "60,20", "--seed", "3", "--generator", "llm"])
    assert args.sample == (60, 20) and args.seed == 3 and args.generator == "llm"
    with pytest.raises(SystemExit):
        parse_args(["--dataset", "d", "--sample", "60"])
    with pytest.raises(SystemExit):  # a running gateway answers with its own generator
        parse_args(["--dataset", "d", "--url", "http://x", "--generator", "llm"])
    smoke = parse_args(["--smoke"])
    assert smoke.dataset.name == "product_docs_qa" and smoke.sample == (1, 1)


def test_the_summary_of_records_is_the_summary_of_the_run(tmp_path: Path) -> None:
    q1, q2 = Question("1", "q", True, ("8",), "f"), Question("2", "q", False, (), None)
    outcomes = [Outcome(q1, "answered", "It is 8. [S1]", ["It is 8."], 10.0, ["/s"], 4.0, "stop"),
                Outcome(q2, "withheld", "", [], 20.0, [], None, "verification_failed")]
    records = tmp_path / "r.jsonl"
    records.write_text("".join(json.dumps(o.record()) + "\n" for o in outcomes))
    assert summarize(outcomes_from_records(records)) == summarize(outcomes)
