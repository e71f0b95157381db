"""A question that asks for a price, a phone number or an email address is refused when no source
holds anything of that form (generator/question_types.py ``answer_form``, the answerer's
``formless``), whatever some unit scores on its other words: the extractive answerer used to
answer "What does the Tern enterprise licence cost?" with "Tern is licensed under the Apache
License 2.0." (docs/answers.md)."""

from __future__ import annotations

import msgspec

from ragmesh_runtime.generator.extractive import INSUFFICIENT_EVIDENCE, ExtractiveAnswerer, ScoredUnit
from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt, EvidenceSource
from ragmesh_runtime.generator.question_types import EMAIL, PHONE, PRICE, answer_form, holds_form
from ragmesh_runtime.generator.units import split_units
from ragmesh_runtime.settings import GeneratorSettings

LICENCE = "Tern is licensed under the Apache License 2.0."
INSTALL = "Install Tern with pip.\n\n- 2 GiB of free memory per worker\n\n4.2.0 — 2026-09-14: Added `tern drain --all`."


def prompt(question: str, *texts: str) -> EvidencePrompt:
    sources = tuple(EvidenceSource(f"S{i}", "Tern manual", "Tern", text) for i, text in enumerate(texts, 1))
    return EvidencePrompt(sources, question)


def decide(question: str, *texts: str, settings: GeneratorSettings | None = None):
    """The answerer's decision with the first unit scored well above the threshold (no encoder:
    the form check reads the sources, not the scores)."""
    answerer = ExtractiveAnswerer(None, settings or GeneratorSettings())  # type: ignore[arg-type]
    unit = split_units(texts[0], "Tern")[0]
    scored = [ScoredUnit("S1", unit, score=0.9, cosine=0.7, lexical=0.5)]
    return answerer.decide(prompt(question, *texts), scored)


def test_the_questions_that_ask_for_a_form_of_answer():
    assert answer_form("What does the Tern enterprise licence cost?") == PRICE
    assert answer_form("How much does a Tern worker cost on AWS?") == PRICE
    assert answer_form("What were the annual carriage fees for the channels?") == PRICE
    assert answer_form("What is the phone number of Tern support?") == PHONE
    assert answer_form("What is the email address of the release manager?") == EMAIL
    # A count, an address that is not said to be an email, a duration: no form of their own.
    assert answer_form("How many jobs run at once by default?") == ""
    assert answer_form("What is the security contact address?") == ""
    assert answer_form("How long does a lease last?") == ""


def test_what_holds_a_price_a_phone_number_an_email_address():
    assert holds_form(PRICE, "The channels paid £30m a year in carriage fees.")
    assert holds_form(PRICE, "The enterprise plan is 12 per seat.")
    assert holds_form(PRICE, "Seats cost $12 each.")
    assert holds_form(PRICE, "The community edition is free of charge.")
    assert not holds_form(PRICE, "2 GiB of free memory per worker")  # free memory is no price
    assert holds_form(PHONE, "Call support on +44 20 7946 0958.")
    assert not holds_form(PHONE, "4.2.0 — 2026-09-14: Added `tern drain --all`.")  # a version and a date
    assert holds_form(EMAIL, "Release manager: Dana Okafor <dana@tern.example>")
    assert not holds_form(EMAIL, "Release manager: Dana Okafor")


def test_a_price_no_source_holds_is_refused_however_well_a_unit_scores():
    answer = decide("What does the Tern enterprise licence cost?", LICENCE, INSTALL)
    assert answer.text == INSUFFICIENT_EVIDENCE and not answer.sufficient
    assert decide("What is the phone number of Tern support?", LICENCE, INSTALL).text == INSUFFICIENT_EVIDENCE
    assert decide("What is the email address of Tern support?", LICENCE).text == INSUFFICIENT_EVIDENCE


def test_a_source_that_holds_the_form_keeps_the_answer():
    priced = "The enterprise licence costs $900 a year."
    assert decide("What does the Tern enterprise licence cost?", priced).text == f"{priced} [S1]"
    # The form may sit in another source than the best unit's: the check reads every source.
    contact = "Support: +1 555 010 4477"
    assert decide("What is the phone number of Tern support?", LICENCE, contact).sufficient
    # A question that asks for no such form is decided by the scores alone, as before.
    assert decide("Under which licence is Tern released?", LICENCE).text == f"{LICENCE} [S1]"


def test_the_rule_can_be_turned_off():
    # The coverage rule's object check refuses this question by itself too ("enterprise licence
    # cost": its last word and "enterprise" in no source); off here to see this rule alone.
    off = msgspec.structs.replace(GeneratorSettings(), require_answer_form=False, require_object=False)
    assert decide("What does the Tern enterprise licence cost?", LICENCE, settings=off).text == f"{LICENCE} [S1]"
    only_form_off = msgspec.structs.replace(GeneratorSettings(), require_answer_form=False)
    assert not decide("What does the Tern enterprise licence cost?", LICENCE, settings=only_form_off).sufficient
