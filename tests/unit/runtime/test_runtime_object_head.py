"""A best unit that shares only the question's names, while the head of the question's object is
in no source (generator/coverage.py, ``unnamed_object_head``; RAGMESH_RUNTIME_GENERATOR_REQUIRE_OBJECT_HEAD)."""

from __future__ import annotations

from ragmesh_runtime.generator.coverage import unnamed_object_head

TERN = [
    "Tern command reference\nExit codes\n0 success\n4 the job was not found\n5 permission denied",
    "CONTRIBUTORS\n\nTern contributors\nMaintainers\nRelease manager: Dana Okafor\n"
    "Tern is licensed under the Apache License 2.0.",
]
LICENCE = "Tern is licensed under the Apache License 2.0."


def test_a_unit_linked_only_by_a_name_does_not_answer_about_a_thing_no_source_names():
    # "founded" is found (the stem of "not found"): the rule turns on the object, "the company".
    assert unnamed_object_head("Who founded the company behind Tern?", LICENCE, TERN) == ["company"]


def test_a_unit_sharing_another_term_or_an_object_a_source_names_is_kept():
    assert unnamed_object_head("Under which licence is Tern released?", LICENCE, TERN) == []
    # The unit shares "licensed" with the question, not only its name.
    assert unnamed_object_head("Who licensed the company behind Tern?", LICENCE, TERN) == []
    # The head is named by a source ("Release manager"), whatever follows its preposition.
    assert unnamed_object_head("Who thanked the manager behind Tern?", LICENCE, TERN) == []


def test_the_answerer_refuses_it_with_the_rule_on():
    import msgspec

    from ragmesh_runtime.generator.extractive import ExtractiveAnswerer, ScoredUnit
    from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt, EvidenceSource
    from ragmesh_runtime.generator.units import split_units
    from ragmesh_runtime.settings import GeneratorSettings

    title, heading, text = TERN[1].split("\n", 2)
    prompt = EvidencePrompt((EvidenceSource("S1", *TERN[0].split("\n", 2)), EvidenceSource("S2", title, heading, text)),
                            "Who founded the company behind Tern?")
    licence, = split_units(LICENCE, heading)
    # Its score with six sources (docs/answers.md), over min_score: only the rule refuses it.
    units = [ScoredUnit("S2", licence, score=0.643, cosine=0.55, lexical=0.25, own_lexical=0.25)]
    on = GeneratorSettings()  # on by default since session 28
    assert on.require_object_head
    off = msgspec.structs.replace(GeneratorSettings(), require_object_head=False)
    assert not ExtractiveAnswerer(None, on).decide(prompt, units).sufficient  # type: ignore[arg-type]
    assert ExtractiveAnswerer(None, off).decide(prompt, units).text == f"{LICENCE} [S2]"  # type: ignore[arg-type]
