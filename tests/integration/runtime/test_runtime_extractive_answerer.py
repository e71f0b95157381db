"""The extractive answerer's selection rules, with the real encoder."""

from __future__ import annotations

import msgspec
import pytest

from ragmesh_runtime.generator.extractive import INSUFFICIENT_EVIDENCE, ExtractiveAnswerer
from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt, EvidenceSource
from ragmesh_runtime.settings import GeneratorSettings


def prompt(question: str, *texts: str) -> EvidencePrompt:
    return EvidencePrompt(
        tuple(EvidenceSource(f"S{i + 1}", "", "", text) for i, text in enumerate(texts)), question
    )


@pytest.fixture
def answerer(runtime_models) -> ExtractiveAnswerer:
    return ExtractiveAnswerer(runtime_models.encoder, GeneratorSettings())


def test_at_most_max_sentences_are_copied(runtime_models):
    settings = msgspec.structs.replace(GeneratorSettings(), max_sentences=2, score_margin=1.0)
    answerer = ExtractiveAnswerer(runtime_models.encoder, settings)
    answer = answerer.answer(
        prompt(
            "How is the cache configured?",
            "The cache is configured with a TTL. The cache is configured per tenant. "
            "The cache is configured in settings.py.",
        )
    )
    assert len(answer.sentences) == 2
    assert answer.text.count("[S1]") == 2


def test_sentences_far_below_the_best_are_left_out(answerer):
    answer = answerer.answer(
        prompt(
            "Which service owns index builds?",
            "The indexer service owns index builds.",
            "The office kitchen has a new coffee machine.",
        )
    )
    assert answer.text == "The indexer service owns index builds. [S1]"


def test_questions_headings_and_fragments_are_not_answers(answerer):
    candidates = answerer.candidates(
        prompt("q", "# The indexer\nWhat does the indexer own?\n\nOK.\n\nThe indexer owns builds.")
    )
    assert [text for _, text in candidates] == ["The indexer owns builds."]


def test_evidence_beyond_the_sentence_cap_is_skipped_from_the_last_source_on(runtime_models):
    settings = msgspec.structs.replace(GeneratorSettings(), max_evidence_sentences=3)
    answerer = ExtractiveAnswerer(runtime_models.encoder, settings)
    candidates = answerer.candidates(
        prompt("q", "First source one. First source two.", "Second source one. Second source two.")
    )
    assert candidates == [
        ("S1", "First source one."),
        ("S1", "First source two."),
        ("S2", "Second source one."),
    ]


def test_duplicate_sentences_are_scored_once(answerer):
    candidates = answerer.candidates(prompt("q", "Same sentence here.", "Same sentence here."))
    assert candidates == [("S1", "Same sentence here.")]


def test_wrapped_sentence_is_copied_on_one_line(answerer):
    wrapped = prompt("Which service owns index builds?", "The indexer service\nowns index builds.")
    answer = answerer.answer(wrapped)
    assert answer.text == "The indexer service owns index builds. [S1]"


def test_empty_question_or_evidence_is_insufficient(answerer):
    assert answerer.answer(prompt("", "The indexer owns builds.")).text == INSUFFICIENT_EVIDENCE
    assert answerer.answer(prompt("What is it?")).text == INSUFFICIENT_EVIDENCE


def test_threshold_is_configurable(runtime_models):
    settings = msgspec.structs.replace(GeneratorSettings(), min_score=5.0)
    strict = ExtractiveAnswerer(runtime_models.encoder, settings)
    answer = strict.answer(
        prompt("Which service owns index builds?", "The indexer service owns index builds.")
    )
    assert answer.text == INSUFFICIENT_EVIDENCE
    assert answer.best_score is not None and answer.best_score > 0.45
