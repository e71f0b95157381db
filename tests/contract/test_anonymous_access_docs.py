"""What a caller without a token may do, wherever the deployment says it, is what the gateway grants.

With ``RAGMESH_ALLOW_ANONYMOUS=true`` an anonymous caller (the site widget) gets the scopes of
``ANONYMOUS_SCOPES`` and nothing else (tests/integration/gateway/test_scope_matrix.py checks every
route). The Compose file's comment and the variable's rows in docs/operations.md and docs/api.md
describe that in words; a word that names another scope's capability (search, read) is a claim the
code does not back.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragmesh_gateway.access.adapters import ANONYMOUS_SCOPES

ROOT = Path(__file__).resolve().parents[2]
# The words that name what a scope allows, as the deployment's prose says it.
SCOPE_WORDS = {
    "rag:search": re.compile(r"\bsearch(es|ing)?\b"),
    "rag:read": re.compile(r"\bread(s|ing)?\b"),
    "rag:answer": re.compile(r"\b(chat|answers?)\b"),
}


def compose_comment() -> str:
    """The comment above the gateway's RAGMESH_AUTH_MODE / RAGMESH_ALLOW_ANONYMOUS in compose.core.yml."""
    lines = (ROOT / "deploy" / "compose.core.yml").read_text(encoding="utf-8").splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("RAGMESH_AUTH_MODE:"))
    comment: list[str] = []
    while lines[at - 1].strip().startswith("#"):
        at -= 1
        comment.insert(0, lines[at].strip().lstrip("#").strip())
    assert comment, "compose.core.yml says nothing above RAGMESH_AUTH_MODE"
    return " ".join(comment)


def table_row(page: str) -> str:
    text = (ROOT / "docs" / page).read_text(encoding="utf-8")
    found = re.search(r"^\| `RAGMESH_ALLOW_ANONYMOUS` \|.*$", text, re.M)
    assert found, f"docs/{page} has no row for RAGMESH_ALLOW_ANONYMOUS"
    return found.group()


def claimed_scopes(text: str) -> set[str]:
    # Only what is said about callers without a token: from there to the end of the sentence.
    said = text[text.lower().index("without a token"):]
    said = said.split(". ")[0]
    return {scope for scope, words in SCOPE_WORDS.items() if words.search(said.lower())}


@pytest.mark.parametrize("where, text", [
    ("deploy/compose.core.yml", compose_comment()),
    ("docs/operations.md, variables", table_row("operations.md")),
    ("docs/api.md, access control", table_row("api.md")),
], ids=["compose-comment", "operations-row", "api-row"])
def test_what_anonymous_callers_may_do_is_said_as_the_code_grants_it(where: str, text: str) -> None:
    assert claimed_scopes(text) == set(ANONYMOUS_SCOPES), (
        f"{where} says a caller without a token may {sorted(claimed_scopes(text))}, the gateway grants "
        f"{sorted(ANONYMOUS_SCOPES)}: {text!r}")


def test_the_check_reads_a_claim_of_more() -> None:
    assert claimed_scopes("A caller without a token may search, read and answer from public corpora only.") == {
        "rag:search", "rag:read", "rag:answer"}
    assert claimed_scopes("Callers without a token may chat. Tokens may search.") == {"rag:answer"}
