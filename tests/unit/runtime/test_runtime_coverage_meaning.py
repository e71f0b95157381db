"""A question's term that no source spells counts as found when a source word is close to it in
meaning (generator/coverage.py with a ``near`` function; word_neighbours.py gives the runtime's),
and as missing otherwise; and a unit joins an answer only with some of the question's words in
its own text (``join_min_lexical``, on since session 26)."""

from __future__ import annotations

from ragmesh_runtime.generator.coverage import missing_key_terms
from ragmesh_runtime.generator.extractive import ExtractiveAnswerer, ScoredUnit
from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt, EvidenceSource
from ragmesh_runtime.generator.units import split_units
from ragmesh_runtime.settings import GeneratorSettings

SHARE = 0.99  # RAGMESH_RUNTIME_GENERATOR_MAX_MISSING_SHARE, the default since session 26
NEAR = 0.45  # RAGMESH_RUNTIME_GENERATOR_NEAR_TERM_SIMILARITY, the default
AMAZON = ["Amazon rainforest\nThe Amazon represents over half of the planet's remaining rainforests."]
# Similarities a word-vector model could give: a paraphrase is close, an unrelated product is not.
CLOSE = {("Earth's", "planet's"): 0.53, ("Oracle", "rainforests"): 0.1}


def near(words, candidates):
    return [max((CLOSE.get((w, c), 0.0) for c in candidates), default=0.0) for w in words]


def test_a_missing_name_close_in_meaning_to_a_source_word_is_found():
    question = "The Amazon rainforest makes up what amount of Earth's rainforests?"
    assert missing_key_terms(question, AMAZON, SHARE) == ["Earth's"]  # by spelling alone
    assert missing_key_terms(question, AMAZON, SHARE, near, NEAR) == []


def test_a_missing_name_with_no_close_source_word_stays_missing():
    assert missing_key_terms("Does the Amazon grow Oracle rainforests?", AMAZON, SHARE, near, NEAR) == ["Oracle"]


def test_the_coverage_rule_is_on_by_default_with_meaning():
    settings = GeneratorSettings()
    assert (settings.max_missing_share, settings.near_term_similarity) == (SHARE, NEAR)


def test_a_unit_holding_none_of_the_question_words_does_not_join_the_answer():
    """Near the best unit's score only because it shares the best one's heading or table: padding."""
    question = "How many jobs run at once by default?"
    units = split_units("max_parallel: 8\n\nlisten_address: 0.0.0.0", "Scheduler settings")
    best = ScoredUnit("S1", units[0], score=0.9, cosine=0.7, lexical=0.5, own_lexical=0.5)
    padding = ScoredUnit("S1", units[1], score=0.85, cosine=0.68, lexical=0.25, own_lexical=0.0)
    prompt = EvidencePrompt((EvidenceSource("S1", "Configuration", "Scheduler settings",
                                            "max_parallel: 8 jobs run at once by default\n\nlisten_address: 0.0.0.0"),),
                            question)
    answer = ExtractiveAnswerer(None, GeneratorSettings()).decide(prompt, [best, padding])  # type: ignore[arg-type]
    assert [u.text for u in answer.units] == [units[0].text]
