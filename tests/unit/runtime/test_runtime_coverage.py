"""Which of a question's terms must some source hold (generator/coverage.py): the words that
only say what form the answer takes, spellings and spelt-out acronyms do not refuse a question."""

from __future__ import annotations

from ragmesh_runtime.generator.coverage import missing_key_terms

SHARE = 0.99  # RAGMESH_RUNTIME_GENERATOR_MAX_MISSING_SHARE as measured (docs/answers.md): all terms, or a name
STRICT = 0.3  # a share that refuses a question two of whose terms are missing

TERN = [
    "Tern manual\nConfiguration\nTern reads `/etc/tern/tern.toml` at start. max_connections: 256",
    "Tern manual\nVersions\nTern 4.2.0 added `tern logs` and raised the default queue depth to 500 for every worker.",
    "Tern manual\nLicence\nTern is licensed under the Apache License 2.0.",
]


def test_a_term_no_source_holds_is_missing():
    assert missing_key_terms("What is the price?", TERN, SHARE) == ["price"]
    assert missing_key_terms("How do I configure LDAP login for Tern?", TERN, SHARE) == ["LDAP"]


def test_under_a_share_two_missing_terms_refuse_and_one_does_not():
    assert missing_key_terms("Which Tern version added a web dashboard?", TERN, SHARE) == []
    assert missing_key_terms("Which Tern version added a web dashboard?", TERN, STRICT) == ["dashboard", "web"]
    # One word of a longer question may be a paraphrase of the source's.
    assert missing_key_terms("Which Tern version raised the queue length?", TERN, 0.1) == []


def test_words_asking_for_the_form_of_the_answer_need_no_source():
    assert missing_key_terms("What is the maximum number of connections?", TERN, STRICT) == []
    assert missing_key_terms("How many connections are there at most?", TERN, 0.0) == []


def test_a_spelling_variant_or_an_abbreviation_is_found():
    assert missing_key_terms("Under which licence is Tern released?", TERN, SHARE) == []
    texts = ["Server\nTLS\ntls_cert: /etc/tern/tls/server.pem"]
    assert missing_key_terms("Where is the TLS certificate?", texts, SHARE) == []


def test_an_acronym_spelt_out_in_a_source_is_found():
    texts = ["Oil crisis\nShortages\nAccording to the American Automobile Association, 20% of the gas stations ran out "
             "of gasoline in February 1974."]
    question = "According to the AAA, what is the percentage of the gas stations that ran out of gasoline?"
    assert missing_key_terms(question, texts, SHARE) == []
    assert missing_key_terms("What did the AAB report?", texts, SHARE) == ["AAB"]


def test_a_closing_clause_naming_the_unit_of_the_answer_is_not_its_subject():
    texts = ["Steam turbine\nEfficiency\nThe turbine entry temperature of a steam turbine is about 565 °C."]
    question = "What is the turbine entry temperature of a steam turbine, in degrees Celsius?"
    assert missing_key_terms(question, texts, SHARE) == []
    assert missing_key_terms("What does Celsius say about the steam turbine?", texts, SHARE) == ["Celsius"]
