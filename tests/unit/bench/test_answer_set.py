"""The answer-set metrics of bench/eval_answers.py: what counts as a hit, and the halves."""

from __future__ import annotations

from ragmesh_bench.answer_set import Outcome, Question, answer_words, contains_gold, split_of, summarize


def test_a_gold_text_must_appear_as_whole_words_after_normalisation() -> None:
    assert contains_gold("The default is 8 jobs. [S1]", ("8",))
    assert not contains_gold("The default is 18 jobs. [S1]", ("8",))
    assert contains_gold("Kawann Short led the team, [S2]", ("kawann short.",))
    assert not contains_gold("An answer citing [S8]", ("S8",))  # citation markers are not answer text


def test_answer_length_counts_words_without_citations() -> None:
    assert answer_words("`max_parallel` — Default: 8 [S1]") == 4


def test_halves_keep_an_articles_questions_together() -> None:
    a = Question("1", "q1", True, ("x",), "article.md")
    b = Question("2", "q2", True, ("y",), "article.md")
    assert split_of(a) == split_of(b) and split_of(a) in ("tune", "check")


def test_summary_rates() -> None:
    hit = Outcome(Question("1", "q", True, ("8",), "f"), "answered", "It is 8. [S1]", ["It is 8."], 10.0)
    refused = Outcome(Question("2", "q", True, ("9",), "f"), "insufficient_evidence", "", [], 10.0)
    unanswerable = Outcome(Question("3", "q", False, (), None), "insufficient_evidence", "", [], 10.0)
    summary = summarize([hit, refused, unanswerable])
    assert summary["answer_hit"] == 0.5 and summary["citation_hit"] == 0.5
    assert summary["false_refusal_rate"] == 0.5 and summary["refusal_rate_unanswerable"] == 1.0
