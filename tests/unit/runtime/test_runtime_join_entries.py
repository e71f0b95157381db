"""A further unit joins an answer only when it is relevant itself (issue 20, item 6): when the best
unit is the entry a list or table keeps for what the question names ("indexer (...) owns ..."),
another entry of it ("retrieval (...) owns ...") does not join, however many of the question's
words it happens to hold, and another unit joins only with as many of them (``join_same_entry``)."""

from __future__ import annotations

import msgspec

from ragmesh_runtime.generator.extractive import ExtractiveAnswerer, ScoredUnit
from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt, EvidenceSource
from ragmesh_runtime.generator.units import split_units
from ragmesh_runtime.settings import GeneratorSettings

OWNERS = ("- **indexer** (`services/indexer`) owns the corpus to versioned collection pipeline.\n"
          "- **retrieval** (`services/retrieval`) owns search over an index version per service call.\n"
          "- **rerank** (`services/rerank`) owns candidate reordering.")
QUESTION = "What does the indexer service own?"


def answer(units: list[ScoredUnit], settings: GeneratorSettings = GeneratorSettings()) -> list[str]:
    prompt = EvidencePrompt((EvidenceSource("S1", "Architecture", "Who owns what", OWNERS),), QUESTION)
    decided = ExtractiveAnswerer(None, settings).decide(prompt, units)  # type: ignore[arg-type]
    return [u.text for u in decided.units]


def test_an_entry_leads_with_what_it_is_about():
    leads = [u.lead for u in split_units(OWNERS, "Who owns what")]
    assert leads == ["indexer", "retrieval", "rerank"]
    row = split_units("| Key | Default |\n|---|---|\n| max_parallel | 8 |", "Settings")[0]
    assert row.lead == "max_parallel"
    assert split_units("Drain every worker, then stop the daemon.", "Upgrade")[0].lead == ""


def test_another_entry_of_the_list_does_not_join_the_entry_the_question_names():
    indexer, retrieval, _ = split_units(OWNERS, "Who owns what")
    best = ScoredUnit("S1", indexer, score=0.91, cosine=0.61, lexical=1.0, own_lexical=1.0)
    sibling = ScoredUnit("S1", retrieval, score=0.85, cosine=0.55, lexical=1.0, own_lexical=1.0)
    assert answer([best, sibling]) == [indexer.text]
    # Before session 27 (the rule off) it joined: it holds "service", "own" and "index" ("an index version").
    assert answer([best, sibling], msgspec.structs.replace(GeneratorSettings(), join_same_entry=False)) == [
        indexer.text, retrieval.text]


def test_a_unit_elsewhere_joins_the_named_entry_only_with_as_many_of_the_question_words():
    indexer = split_units(OWNERS, "Who owns what")[0]
    sentence, = split_units("The indexer service turns a folder of documents into a versioned collection.", "Indexing")
    elsewhere = [ScoredUnit("S2", sentence, score=0.80, cosine=0.60, lexical=0.67, own_lexical=0.67)]
    best = ScoredUnit("S1", indexer, score=0.91, cosine=0.61, lexical=1.0, own_lexical=1.0)
    assert answer([best, *elsewhere]) == [indexer.text]
    as_many = [ScoredUnit("S2", sentence, score=0.80, cosine=0.60, lexical=1.0, own_lexical=1.0)]
    assert answer([best, *as_many]) == [indexer.text, sentence.text]
