"""Support, not only markers: a cited sentence passes only when the sources it cites say it.

The evidence is the three-source block of issue 20 (a config table, upgrade steps, an overview),
written as the product-docs corpus writes them (tests/fixtures/product_docs_qa).
"""

from __future__ import annotations

import pytest

from ragmesh_generation.citations import CitationChecker
from ragmesh_generation.domain import EvidenceSource
from ragmesh_generation.support import SourceText, attribute, sentences, support

CONFIG_TABLE = EvidenceSource("S1", "Configuration", "Configuration > Scheduler settings", "", """\
## Scheduler settings

| Setting | Default | Description |
|---|---|---|
| `max_parallel` | 8 | Jobs that run at once on one worker |
| `queue_depth` | 500 | Jobs a queue holds before new submissions are refused |
| `retry_limit` | 3 | Attempts of a failed job before it is marked failed |
| `retry_backoff` | 30s | Wait before the first retry; doubled after each attempt |
| `job_timeout` | 2h | A job running longer is stopped |""")
UPGRADE_STEPS = EvidenceSource("S2", "Upgrading Tern", "Upgrading Tern > Upgrade steps", "", """\
## Upgrade steps

1. Drain every worker with `tern drain --all`.
2. Back up the history database with `pg_dump tern > tern.sql`.
3. Install the new package: `/opt/tern/bin/pip install -U tern-scheduler`.
4. Run the schema migration with `tern migrate`.
5. Restart the daemon and undrain the workers with `tern undrain --all`.""")
OVERVIEW = EvidenceSource("S3", "Installing Tern", "Installing Tern", "", """\
# Installing Tern

Tern is a small job scheduler for build farms. It runs as one daemon, `ternd`, and one command
line client, `tern`. Tern reads `/etc/tern/tern.toml` at start; a queue may hold up to 1000 jobs
and the daemon keeps forty-two days of logs.""")
EVIDENCE = [CONFIG_TABLE, UPGRADE_STEPS, OVERVIEW]
checker = CitationChecker(EVIDENCE)


def kinds(text: str) -> list[str]:
    return [p.kind for p in checker.check(text).problems]


def test_a_cited_sentence_its_sources_never_say_is_unsupported() -> None:
    # "How do I configure LDAP login?": not in the evidence; a real model answered this, citing
    # two real sources. The markers are right, the sentence is not in them.
    answer = "To configure LDAP login, set the LDAP_URL and LDAP_BASEDN in the config file. [S1][S3]"
    check = checker.check(answer)
    assert not check.ok
    assert [p.kind for p in check.problems] == ["unsupported_statement"]
    assert check.problems[0].source_ids == ("S1", "S3")


@pytest.mark.parametrize("answer", [
    "8 [S1]",  # "How many jobs run at once by default?"
    "By default, 8 jobs run at once on one worker. [S1]",  # a paraphrase of the row
    "A worker runs 8 jobs at once by default [S1].",
    "First drain every worker with `tern drain --all`, then back up the history database. [S2]",
    "Run `tern migrate` after installing the new package. [S2]",
    "Tern is a job scheduler for build farms [S3]. It reads /etc/tern/tern.toml at start [S3].",
    "A failed job is retried 3 times, the first retry after 30s [S1].",
])
def test_answers_the_sources_hold_still_pass(answer: str) -> None:
    assert checker.check(answer).ok, checker.check(answer)


def test_numbers_match_whatever_their_format() -> None:
    # Thousands separators and leading zeros are formatting; spelled-out numbers in a source count.
    assert checker.check("A queue may hold up to 1,000 jobs [S3].").ok
    assert checker.check("A queue may hold up to 1000 jobs [S3].").ok
    assert checker.check("The daemon keeps 42 days of logs [S3].").ok
    assert checker.check("The daemon keeps forty-two days of logs [S3].").ok
    # ... but a different number is a different claim, and so is a version or a decimal.
    assert kinds("By default, 16 jobs run at once on one worker. [S1]") == ["unsupported_statement"]
    assert kinds("A queue may hold up to 10,000 jobs [S3].") == ["unsupported_statement"]
    assert kinds("8.5 jobs run at once [S1].") == ["unsupported_statement"]


def test_the_number_must_be_in_a_cited_source_not_just_in_the_evidence() -> None:
    assert kinds("By default, 500 jobs [S2].") == ["unsupported_statement"]  # 500 is in S1
    assert checker.check("By default, 500 jobs [S2][S1].").ok


@pytest.mark.parametrize("answer", [
    "Run `sudo upgrade tern` to upgrade. [S2]",  # an invented command (SmolLM2 wrote this one)
    "Set `max_workers` to 8 [S1].",  # an invented setting beside a right number
    "Upgrade with Kubernetes and Helm [S2].",  # names the sources never mention
    "Restart the daemon with systemctl restart ternd.service [S2].",  # an invented identifier
    "The weather in Paris is usually mild in spring and autumn [S3].",  # no word of it is there
])
def test_invented_specifics_are_unsupported(answer: str) -> None:
    assert kinds(answer) == ["unsupported_statement"]


def test_every_sentence_of_a_segment_is_checked() -> None:
    # Only the last sentence carries the marker; the citation covers both, so both must hold.
    assert kinds("Tern supports LDAP single sign-on. It runs as one daemon [S3].") == ["unsupported_statement"]
    assert checker.check("Tern is a small job scheduler. It runs as one daemon [S3].").ok


def test_quotes_and_urls_keep_their_own_problem() -> None:
    assert kinds('The docs say "run the installer as root" [S2].') == ["unsupported_quote"]


def test_support_report_names_what_is_missing() -> None:
    found = support("set the LDAP_URL to 8 [S1]", [SourceText(CONFIG_TABLE.text)])
    assert found.missing_terms == ("ldap_url",)
    assert not found.passes()


def test_attribution_cites_each_sentence_from_the_source_that_holds_it() -> None:
    indexed = {s.source_id: SourceText(s.text) for s in EVIDENCE}
    text = "Drain every worker with `tern drain --all`. Then run the schema migration with `tern migrate`.\n" \
           "By default 8 jobs run at once on one worker."
    repaired = attribute(text, indexed)
    assert repaired == ("Drain every worker with `tern drain --all`. [S2] Then run the schema migration with "
                        "`tern migrate`. [S2]\nBy default 8 jobs run at once on one worker. [S1]")
    assert checker.check(repaired.split("\n")[1]).ok


@pytest.mark.parametrize("text", [
    "Drain every worker with `tern drain --all`. Hope this helps!",  # one sentence no source holds
    "To configure LDAP login, set LDAP_URL in the config file.",
    "Sure!",
])
def test_attribution_gives_up_when_a_sentence_is_in_no_source(text: str) -> None:
    assert attribute(text, {s.source_id: SourceText(s.text) for s in EVIDENCE}) is None


def test_a_dot_after_an_initial_ends_no_sentence_to_check():
    """xquad through the mesh withheld "The T. T. Tsui Gallery of Chinese art opened in 1991."
    copied from its source: cut after each "T.", the fragment "T." has nothing checkable and fails
    (the segmenter already read initials and abbreviations so)."""
    gallery = EvidenceSource("S1", "Victoria and Albert Museum", "Collections > Asia", "", (
        "The T. T. Tsui Gallery of Chinese art opened in 1991, displaying objects from China. "
        "Modern isolates of Y. pestis strains Y. p. orientalis and Y. p. medievalis were found."))
    gallery_checker = CitationChecker([gallery])
    assert gallery_checker.check("The T. T. Tsui Gallery of Chinese art opened in 1991, displaying objects "
                                 "from China. [S1]").ok
    assert gallery_checker.check("Modern isolates of Y. pestis strains Y. p. orientalis and Y. p. medievalis "
                                 "were found. [S1]").ok
    assert sentences("The T. T. Tsui Gallery opened, e.g. in 1991. It is large. [S1]") == [
        "The T. T. Tsui Gallery opened, e.g. in 1991.", "It is large."]
    # A sentence the source does not say still fails, initials or not.
    assert not gallery_checker.check("The T. T. Tsui Gallery of Japanese art closed in 2001. [S1]").ok
