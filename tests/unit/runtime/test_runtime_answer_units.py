"""Answer units: one test per kind, and no markup in what an answer would show."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragmesh_runtime.generator.units import (
    CODE_LINE,
    KEY_VALUE,
    LIST_ITEM,
    SENTENCE,
    TABLE_ROW,
    clean_inline,
    split_units,
)

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "product_docs_qa" / "corpus"


def kinds(text: str, heading: str = "") -> list[tuple[str, str]]:
    return [(u.kind, u.text) for u in split_units(text, heading)]


def test_prose_is_cut_into_sentences_with_inline_markup_removed() -> None:
    units = kinds("The daemon listens on **port 7420** by default. See the [guide](guide.md) for *more*.")
    assert units == [(SENTENCE, "The daemon listens on port 7420 by default."),
                     (SENTENCE, "See the guide for more.")]


def test_a_table_row_is_shown_with_its_column_headers() -> None:
    table = ("## Scheduler settings\n\n| Setting | Default | Description |\n|---|---|---|\n"
             "| `max_parallel` | 8 | Jobs that run at once on one worker |\n")
    [row] = split_units(table)
    assert row.kind == TABLE_ROW
    assert row.text == "`max_parallel` — Default: 8; Description: Jobs that run at once on one worker"
    assert "Scheduler settings" in row.context and "Default" in row.context


def test_a_two_column_row_reads_as_name_and_value() -> None:
    assert kinds("| Limit | Value |\n|---|---|\n| Most queues per daemon | 64 |") == [
        (TABLE_ROW, "Most queues per daemon: 64")]


def test_a_tab_separated_table_from_html_takes_its_first_row_as_headers() -> None:
    text = "Exit codes\n\nCode\tMeaning\n3\tthe daemon cannot be reached\n4\tthe job was not found"
    assert kinds(text)[-2:] == [(TABLE_ROW, "3: the daemon cannot be reached"), (TABLE_ROW, "4: the job was not found")]


def test_list_items_lose_their_markers_and_keep_their_lead_in_as_context() -> None:
    units = split_units("Each job has one of four priorities:\n\n1. `urgent` runs before anything else\n"
                        "2. **batch** runs only when a worker is\n   otherwise idle\n")
    items = [u for u in units if u.kind == LIST_ITEM]
    assert [u.text for u in items] == ["`urgent` runs before anything else",
                                       "batch runs only when a worker is otherwise idle"]
    assert all("four priorities" in u.context for u in items)


def test_a_changelog_item_is_shown_with_its_version_heading() -> None:
    units = kinds("## 4.1.0 — 2026-06-02\n\n- Added job priorities.\n")
    assert units == [(LIST_ITEM, "4.1.0 — 2026-06-02: Added job priorities.")]


def test_key_value_lines_are_units_of_their_own() -> None:
    text = "Release manager: Dana Okafor <dana@tern.example>\nSecurity contact: security@tern.example\n"
    assert kinds(text) == [(KEY_VALUE, "Release manager: Dana Okafor <dana@tern.example>"),
                           (KEY_VALUE, "Security contact: security@tern.example")]


def test_a_block_of_short_lines_is_one_unit_per_line_under_its_title() -> None:
    text = "Maintainers\n  Priya Raman - scheduler core\n  Tomasz Wolny - storage and migrations\n"
    units = split_units(text)
    assert [(u.kind, u.text) for u in units] == [(LIST_ITEM, "Priya Raman - scheduler core"),
                                                 (LIST_ITEM, "Tomasz Wolny - storage and migrations")]
    assert all(u.context == "Maintainers" for u in units)


def test_code_lines_are_inline_code_after_the_sentence_that_leads_into_them() -> None:
    text = "Initialise the state folder once, then start the daemon:\n\n```sh\ntern init --state /var/lib/tern\n```\n"
    units = kinds(text)
    assert (CODE_LINE, "Initialise the state folder once, then start the daemon: `tern init --state /var/lib/tern`") \
        in units


def test_headings_are_context_not_units() -> None:
    units = split_units("# Jobs\n\n## Retries\n\nA failed job is retried three times.")
    assert [(u.kind, u.text, u.context) for u in units] == [
        (SENTENCE, "A failed job is retried three times.", "Retries")]


@pytest.mark.parametrize("raw, shown", [
    ("**bold** and __strong__ and *em* and _em_", "bold and strong and em and em"),
    ("a `code span` stays", "a `code span` stays"),
    ("a stray ` backtick", "a stray backtick"),
    ("![logo](x.png) [link](https://x.example/a_(b)) [ref][1]", "logo link ref"),
    ("<b>tag</b> gone", "tag gone"),
    ("~~old~~ new", "old new"),
])
def test_clean_inline(raw: str, shown: str) -> None:
    assert clean_inline(raw) == shown


_MARKUP = re.compile(r"\*\*|__|^#|^\s*[-*+]\s|\|\s*---|\]\(|</?[a-z]+[ >]|^```")


def test_no_unit_of_the_product_docs_shows_markup() -> None:
    """Every unit of every file of the product-docs answer set: balanced inline code at most."""
    checked = 0
    for path in CORPUS.rglob("*"):
        if not path.is_file():
            continue
        for unit in split_units(path.read_text(encoding="utf-8")):
            checked += 1
            assert not _MARKUP.search(unit.text), (path.name, unit.text)
            assert unit.text.count("`") % 2 == 0, (path.name, unit.text)
            assert not unit.text.startswith("`") or unit.kind in (CODE_LINE, LIST_ITEM, TABLE_ROW), unit.text
    assert checked > 50


def test_html_entities_in_prose_are_decoded_and_code_keeps_them() -> None:
    # docs/runtime.md's prompt example made the make-run sample answer show a raw "&amp;".
    assert kinds("Ingestion &amp; index builds run in the indexer &mdash; never in the gateway.") == [
        (SENTENCE, "Ingestion & index builds run in the indexer — never in the gateway.")]
    assert clean_inline("escape `&amp;` as &lt;b&gt;") == "escape `&amp;` as <b>"


def test_html_comments_and_example_markers_are_never_units() -> None:
    # "What does a GPU host need…" was answered with this marker as a cited sentence.
    text = ("A GPU host needs the NVIDIA Container Toolkit.\n\n"
            "<!-- example: not-run reason=gpu installs the NVIDIA Container Toolkit -->\n"
            "```sh\nsudo apt-get install nvidia-container-toolkit\n```\n\n"
            "<!--\na comment over\nseveral lines\n-->\nThe toolkit ships with the driver. <!-- inline note --> Restart Docker.")
    shown = [u.text for u in split_units(text)]
    assert not [t for t in shown if "<!--" in t or "-->" in t or "example:" in t or "comment" in t], shown
    assert "A GPU host needs the NVIDIA Container Toolkit." in shown
    assert "Restart Docker." in shown


def test_a_comment_cut_open_by_the_chunk_boundary_is_dropped() -> None:
    assert kinds("Workers renew leases.\n\n<!-- example: none reason=diagram the lease cycle") == [
        (SENTENCE, "Workers renew leases.")]


def test_front_matter_is_never_a_unit() -> None:
    text = "---\ntitle: Installing Tern\nlayout: page\n---\n\nTern needs Python 3.11."
    assert kinds(text) == [(SENTENCE, "Tern needs Python 3.11.")]


def test_a_table_row_keeps_its_cells_by_header() -> None:
    [eco, high] = split_units("| Mode | Runtime | Brightness |\n|---|---|---|\n| Eco | 40 h | 100 lm |\n"
                              "| High | 2 h | 1,200 lm |\n")
    assert eco.cells == (("Mode", "Eco"), ("Runtime", "40 h"), ("Brightness", "100 lm"))
    assert high.cells[2] == ("Brightness", "1,200 lm")
