"""Findings of issue 20 tried as a new user would, each a test that failed before its fix."""

from __future__ import annotations

import msgspec
import pytest

from ragmesh_runtime.generator.extractive import INSUFFICIENT_EVIDENCE, ExtractiveAnswerer
from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt, EvidenceSource
from ragmesh_runtime.settings import GeneratorSettings

# docs/runtime.md's evidence prompt example, as retrieval returns it: its code block holds an
# example sentence that is about the indexer, and true of nothing.
RUNTIME_EXAMPLE = """### The evidence prompt protocol

The generation service renders, and the runtime parses, this format in the last user message:

<!-- example: none reason=format the shape of the last user message -->
```
<evidence>
<source id="S1" title="Architecture" heading="Services &gt; Indexer">
The indexer service owns document ingestion &amp; index builds.
</source>
</evidence>
<question>What does the indexer own?</question>
```
"""
WHO_OWNS_WHAT = """## Who owns what

- indexer (`services/indexer`) owns the corpus → versioned collection pipeline: parse, chunk, embed, validate, atomically promote the alias, roll back, and the version registry in PostgreSQL.
- gateway (`services/gateway`) owns the public edge: REST, SSE, MCP, authentication and rate limits.
"""
LIGHT = """# Trail lamp

| Mode | Runtime | Brightness |
|---|---|---|
| Eco | 40 h | 100 lm |
| Normal | 12 h | 400 lm |
| High | 90 min | 1,200 lm |

The lamp comes in three colours: black, orange and olive.
"""


def prompt(question: str, *texts: str) -> EvidencePrompt:
    return EvidencePrompt(tuple(EvidenceSource(f"S{i + 1}", "", "", t) for i, t in enumerate(texts)), question)


@pytest.fixture
def answerer(runtime_models) -> ExtractiveAnswerer:
    return ExtractiveAnswerer(runtime_models.encoder, GeneratorSettings())


def test_an_example_string_in_a_code_block_does_not_answer_a_question_about_the_product(answerer):
    answer = answerer.answer(prompt("What does the indexer service own?", WHO_OWNS_WHAT, RUNTIME_EXAMPLE))
    assert answer.sufficient
    assert "&amp;" not in answer.text and "document ingestion" not in answer.text
    assert answer.text.startswith("indexer (`services/indexer`) owns the corpus")


def test_a_code_line_still_answers_a_question_asking_for_a_command(answerer):
    answer = answerer.answer(prompt("Which command initialises the state folder?",
                                    "Initialise the state folder once:\n\n```sh\ntern init --state /var/lib/tern\n```\n"))
    assert "`tern init --state /var/lib/tern`" in answer.text


def test_an_example_marker_is_never_a_cited_sentence(answerer):
    answer = answerer.answer(prompt(
        "What does a GPU host need?",
        "A GPU host needs the NVIDIA Container Toolkit and a driver of version 535 or newer.\n\n"
        "<!-- example: not-run reason=gpu installs the NVIDIA Container Toolkit -->\n"
        "```sh\nsudo apt-get install -y nvidia-container-toolkit\n```\n"))
    assert "<!--" not in answer.text and "reason=" not in answer.text
    assert answer.text.startswith("A GPU host needs the NVIDIA Container Toolkit")


def test_the_longest_runtime_is_the_one_row_that_holds_it(answerer):
    answer = answerer.answer(prompt("Which light mode has the longest runtime?", LIGHT))
    assert answer.text == "Eco — Runtime: 40 h; Brightness: 100 lm [S1]"


def test_the_smallest_value_compares_units_of_time(answerer):
    answer = answerer.answer(prompt("Which light mode has the shortest runtime?", LIGHT))
    assert answer.text == "High — Runtime: 90 min; Brightness: 1,200 lm [S1]"


def test_a_price_is_refused_by_default_when_no_source_holds_one(answerer):
    """Issue 20's price question over a product folder, answered with the lamp's colours, and the
    product-docs licence question answered with the licence's name: refused at the defaults now
    (the answer-form rule, question_types.answer_form), with the coverage rule off."""
    assert answerer.answer(prompt("What is the price of the lamp?", LIGHT)).text == INSUFFICIENT_EVIDENCE
    overview = "# Tern\n\nTern is a small job scheduler for build farms.\n\n## Licence\n\nTern is licensed under the Apache License 2.0.\n"
    assert answerer.answer(prompt("What does the Tern enterprise licence cost?", overview)).text == INSUFFICIENT_EVIDENCE
    assert answerer.answer(prompt("What is the phone number of Tern support?", overview)).text == INSUFFICIENT_EVIDENCE
    priced = LIGHT + "\nThe lamp costs $49 in every colour.\n"
    assert "$49" in answerer.answer(prompt("What is the price of the lamp?", priced)).text


@pytest.fixture
def covering(runtime_models) -> ExtractiveAnswerer:
    """The coverage rule on (RAGMESH_RUNTIME_GENERATOR_MAX_MISSING_SHARE=0.99): off by default,
    because on xquad's check half it still refuses one answered question, which leaves answer_hit
    no margin over its 0.92 target (docs/answers.md)."""
    return ExtractiveAnswerer(runtime_models.encoder,
                              msgspec.structs.replace(GeneratorSettings(), max_missing_share=0.99))


def test_a_question_about_what_no_source_mentions_is_refused(covering):
    assert covering.answer(prompt("What is the price?", LIGHT)).text == INSUFFICIENT_EVIDENCE


def test_a_name_that_no_source_mentions_is_refused(covering):
    docs = "Tern reads `/etc/tern/tern.toml` at start.\n\nConfigure the login with `tern auth` before the first run."
    assert covering.answer(prompt("How do I configure LDAP login for Tern?", docs)).text == INSUFFICIENT_EVIDENCE
    assert covering.answer(prompt("How do I configure the login for Tern?", docs)).sufficient


def test_a_misspelt_or_compound_name_still_counts_as_mentioned(covering):
    text = "The Super Bowl was played in Santa Clara, near the Carlsbad office of the league."
    assert covering.uncovered(prompt("Where was the Superbowl played, near Carslbad?", text)) == []


def test_an_unrelated_sentence_does_not_pad_the_answer(runtime_models):
    settings = msgspec.structs.replace(GeneratorSettings(), join_cosine_margin=0.15)
    answerer = ExtractiveAnswerer(runtime_models.encoder, settings)
    answer = answerer.answer(prompt("What does the indexer service own?", WHO_OWNS_WHAT))
    assert answer.text.count("[S1]") == 1 and "gateway" not in answer.text


def test_make_runs_sample_is_answered_by_the_one_entry_that_answers_it(answerer):
    """Issue 20's make run sample, with the units that joined it before session 27: the retrieval
    entry of the same list (it holds "service", "owns" and "an index version") and a sentence
    elsewhere about what the indexer does (two of the question's three terms)."""
    owners = WHO_OWNS_WHAT + ("- retrieval (`services/retrieval`) owns search: one hybrid query per corpus, "
                              "chunk reads pinned to an index version.\n")
    indexing = ("The indexer (`services/indexer`, gRPC on 50054) turns a folder of documents into a versioned, "
                "validated collection and moves a corpus's serving alias from one version to the next.")
    answer = answerer.answer(prompt("What does the indexer service own?", owners, indexing))
    assert answer.text.startswith("indexer (`services/indexer`) owns the corpus")
    assert [unit.source_id for unit in answer.units] == ["S1"], answer.text
