"""Which of a question's terms must some source hold (generator/coverage.py): the words that
only say what form the answer takes, spellings and spelt-out acronyms do not refuse a question."""

from __future__ import annotations

from ragmesh_runtime.generator.coverage import missing_key_terms, object_phrases

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
    # The share rule alone (the object rule, tested below, refuses this question by itself).
    question = "Which Tern version added a web dashboard?"
    assert missing_key_terms(question, TERN, SHARE, require_object=False) == []
    assert missing_key_terms(question, TERN, STRICT, require_object=False) == ["dashboard", "web"]
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


def test_an_object_no_source_names_is_missing_at_the_measured_share():
    """The thing asked about, after an article or the verb of "how do I ...", has its head word and
    one more in no source: refused, though most of the question's other words are found."""
    assert missing_key_terms("Which Tern version added a web dashboard?", TERN, SHARE) == ["web", "dashboard"]
    assert missing_key_terms("How do I configure email notifications for every worker?", TERN, SHARE) == [
        "email", "notifications"]
    assert missing_key_terms("Which Tern version added a plugin marketplace?", TERN, SHARE) == ["plugin", "marketplace"]


def test_an_object_with_one_missing_word_or_a_found_head_is_not_refused():
    # One word of the object may be the source's synonym ("queue length" for "queue depth").
    assert missing_key_terms("Which Tern version raised a queue length?", TERN, SHARE) == []
    # The head is found: the missing words only qualify what the sources do name.
    assert missing_key_terms("Which Tern version added a shiny colourful worker?", TERN, SHARE) == []


def test_after_a_question_word_the_phrase_describes_the_answer_and_need_not_be_found():
    texts = ["Complexity\nClasses\nIt is believed that P differs from NP, though nobody has proved it."]
    question = "What is the unproven assumption generally ascribed to complexity classes?"
    assert missing_key_terms(question, texts, SHARE) == []
    assert object_phrases(question) == []
    assert object_phrases("Which Tern version added a web dashboard, and when?") == [["web", "dashboard"]]
    assert object_phrases("How do I configure email notifications for failed jobs?") == [["email", "notifications"]]
