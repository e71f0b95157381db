"""The CLI's JSON outputs, byte for byte, against the gateway and indexer test doubles.

Each command's stdout is compared with its snapshot in tests/fixtures/contracts/cli/<name>.json, so a
refactor of the CLI cannot change what scripts and agents read. Values that differ from run to run
(request ids, the doubles' ports, a temporary folder) are replaced by a placeholder first; nothing else
is. After a deliberate change of a contract, rewrite the snapshots with
``RAGMESH_UPDATE_CONTRACTS=1 .venv/bin/python -m pytest tests/integration/gateway/test_cli_contract_json.py``
and name the change in the commit.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway_mesh import Mesh, chunk_id, running_mesh
from loopback_server import serve_in_thread
from ragmesh_cli.main import main
from ragmesh_gateway.app import create_app

SNAPSHOTS = Path(__file__).resolve().parents[2] / "fixtures" / "contracts" / "cli"
UPDATE = os.environ.get("RAGMESH_UPDATE_CONTRACTS") == "1"
REQUEST_ID = re.compile(r'("request_id": )"[^"]*"')
TRACE = "0af7651916cd43dd8448eb211c80319c"
T0 = 1_750_000_000_000_000_000  # ns


@pytest.fixture(scope="module")
def doubles() -> Iterator[tuple[Mesh, str]]:
    with running_mesh() as mesh, serve_in_thread(create_app(mesh.settings())) as url:
        yield mesh, url


def _run(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(argv))
    return code, capsys.readouterr().out


def _stable(out: str, *, replace: dict[str, str]) -> str:
    out = REQUEST_ID.sub(r'\1"<request_id>"', out)
    for value, placeholder in replace.items():
        out = out.replace(value, placeholder)
    return out


def _compare(name: str, code: int, out: str) -> None:
    path = SNAPSHOTS / f"{name}.json"
    document = json.dumps({"exit_code": code}) + "\n" + out
    if UPDATE:
        path.write_text(document, encoding="utf-8")
    assert path.read_bytes() == document.encode("utf-8"), f"`ragmesh {name}` changed its JSON"


GATEWAY_COMMANDS = {
    "search": ("search", "how do I start?", "--top-k", "2"),
    "search_filtered": ("search", "how do I start?", "--library", "docs", "--tag", "guide", "--include-content"),
    "get": ("get", chunk_id(3), "--index-version", "v1"),
    "answer": ("answer", "how do I start?"),
    "corpora": ("corpora",),
}
INDEXER_COMMANDS = {
    "index_build": ("index", "build", "--corpus", "docs@1"),
    "index_promote": ("index", "promote", "--corpus", "docs@1", "--index-version", "v2", "--reason", "test"),
    "index_rollback": ("index", "rollback", "--corpus", "docs@1"),
    "index_status": ("index", "status", "--corpus", "docs@1"),
    "index_validate": ("index", "validate", "--corpus", "docs@1", "--index-version", "v2"),
    "index_ci": ("index", "ci", "--corpus", "docs@1"),
    "index_diff": ("index", "diff", "--corpus", "docs@1"),
    "corpus_verify": ("corpus", "verify", "--corpus", "docs@1"),
    "corpus_remove_dry_run": ("corpus", "remove", "docs@1", "--dry-run"),
    "corpus_remove": ("corpus", "remove", "docs@1"),
}


@pytest.mark.parametrize("name", sorted(GATEWAY_COMMANDS))
def test_gateway_commands_print_the_same_json(name: str, doubles, capsys) -> None:
    _, url = doubles
    code, out = _run(capsys, *GATEWAY_COMMANDS[name], "--url", url)
    _compare(name, code, _stable(out, replace={url: "<gateway>"}))


@pytest.mark.parametrize("name", sorted(INDEXER_COMMANDS))
def test_indexer_commands_print_the_same_json(name: str, doubles, capsys) -> None:
    mesh, _ = doubles
    addr = f"127.0.0.1:{mesh.servers['indexer'].port}"
    code, out = _run(capsys, *INDEXER_COMMANDS[name], "--addr", addr)
    _compare(name, code, _stable(out, replace={addr: "<indexer>"}))


def _span(name: str, span_id: str, parent: str | None, start_ms: int, duration_ms: int, **attributes) -> str:
    return json.dumps({"service": "ragmesh-gateway", "name": name, "kind": "SERVER", "trace_id": TRACE,
                       "span_id": span_id, "parent_id": parent, "start_ns": T0 + start_ms * 1_000_000,
                       "end_ns": T0 + (start_ms + duration_ms) * 1_000_000, "status": "UNSET",
                       "attributes": attributes})


def test_trace_json_and_down_print_the_same_json(tmp_path: Path, capsys) -> None:
    from ragmesh_cli.mesh.lifecycle import StateFolder

    state = tmp_path / "state"
    StateFolder(state).claim()
    spans = state / "traces" / "spans.jsonl"
    spans.parent.mkdir(parents=True)
    spans.write_text(_span("POST /api/rag/v1/search", "a1", None, 0, 40, **{"ragmesh.request_id": "req-1"}) + "\n"
                     + _span("/ragmesh.v1.Retrieval/Search", "a2", "a1", 2, 30) + "\n", encoding="utf-8")
    code, out = _run(capsys, "trace", "req-1", "--json", "--state-dir", str(state))
    _compare("trace_json", code, out)
    code, out = _run(capsys, "down", "--state-dir", str(state))
    _compare("down", code, _stable(out, replace={str(state.resolve()): "<state>"}))
