"""The coverage rule with the runtime's own word vectors, on by default since session 26: a
question about something no retrieved source mentions is refused, and a question that paraphrases
its source ("Earth's" for "the planet's") is still answered (docs/answers.md)."""

from __future__ import annotations

import msgspec
import pytest

from ragmesh_runtime.generator.extractive import INSUFFICIENT_EVIDENCE, ExtractiveAnswerer
from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt, EvidenceSource
from ragmesh_runtime.generator.word_neighbours import WordNeighbours
from ragmesh_runtime.settings import GeneratorSettings

TERN = (
    "Tern reads `/etc/tern/tern.toml` at start. Every setting can also be given as an environment variable.",
    "4.2.0 — 2026-09-14: Fixed a crash when a job name contained a slash.\n\n"
    "4.1.0 — 2026-05-02: Added `tern logs --follow`.",
    "Tern is licensed under the Apache License 2.0. Contributions are welcome on the project's tracker.",
)
AMAZON = ("The Amazon represents over half of the planet's remaining rainforests, and comprises the largest "
          "and most biodiverse tract of tropical rainforest in the world.",)


def prompt(question: str, texts: tuple[str, ...], title: str) -> EvidencePrompt:
    return EvidencePrompt(tuple(EvidenceSource(f"S{i + 1}", title, title, t) for i, t in enumerate(texts)), question)


@pytest.fixture
def answerer(runtime_models) -> ExtractiveAnswerer:
    return ExtractiveAnswerer(runtime_models.encoder, GeneratorSettings())


def test_the_static_word_vectors_tell_a_paraphrase_from_another_subject():
    near = GeneratorSettings().near_term_similarity
    earth, oracle, jenkins = WordNeighbours.shared().closest(["Earth's", "Oracle", "Jenkins"],
                                                             ["planet's", "sql", "history", "licensed"])
    assert earth >= near > max(oracle, jenkins)


def test_a_question_naming_what_no_source_mentions_is_refused_at_the_defaults(answerer):
    for question in ("How many stars does Tern have on GitHub?", "Does Tern support Oracle databases?"):
        assert answerer.answer(prompt(question, TERN, "Tern manual")).text == INSUFFICIENT_EVIDENCE, question


def test_a_paraphrase_of_the_source_is_answered_with_the_coverage_rule_on(runtime_models):
    settings = msgspec.structs.replace(GeneratorSettings(), max_missing_share=0.99)
    answer = ExtractiveAnswerer(runtime_models.encoder, settings).answer(
        prompt("The Amazon rainforest makes up what amount of Earth's rainforests?", AMAZON, "Amazon rainforest"))
    assert answer.sufficient and "over half" in answer.text


def test_a_question_about_a_thing_no_source_names_is_refused_at_the_defaults(answerer):
    """Most of its words are the documents' ("Tern", "version", "added"); the thing it asks about,
    the phrase after its article or its "how do I" verb, is in no source and near no source word."""
    for question in ("Which Tern version added a web dashboard?",
                     "How do I configure email notifications for Tern?"):
        assert answerer.answer(prompt(question, TERN, "Tern manual")).text == INSUFFICIENT_EVIDENCE, question
    answer = answerer.answer(prompt("Which Tern version added a follow option to the logs command?", TERN, "Tern manual"))
    assert answer.sufficient and "4.1.0" in answer.text
