"""`ragmesh trace ID` finds an indexer command of the CLI by the request id it printed (issue 23).

The indexer runs as its own process, as `ragmesh up` starts it, so its spans go to the state folder's
span file; the CLI is a process too. Before this, the CLI's calls carried the request id (the indexer
logged it) but no server span recorded it, and each call began a trace of its own: `ragmesh trace`
answered "no span carries request id ..." for the id of every failed indexer command.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from indexer_stack import IndexerStack

ROOT = Path(__file__).resolve().parents[3]
NOT_FOUND_LINE = re.compile(r"^ragmesh: NOT_FOUND: .*\(request id (\S+), in the indexer's log\)$")


@pytest.fixture
async def stack(tmp_path: Path, pg_url: str, unique_schema):
    # Only the indexer and its PostgreSQL registry: the calls here read the registry and nothing
    # else (no store, no model runtime: the address below refuses connections).
    s = IndexerStack(tmp_path, runtime_url="http://127.0.0.1:9", pg_url=pg_url, schema=unique_schema("trc"))
    s.start_indexer()
    yield s
    s.mesh.stop_one("indexer", sig=signal.SIGTERM)
    await s.close()


def ragmesh_trace(stack: IndexerStack, request_id: str, complete=lambda tree: True) -> dict:
    """`ragmesh trace ID --json` once the processes exported the spans (a batch every 200 ms, each
    process on its own) and the tree is ``complete``."""
    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run([sys.executable, "-m", "ragmesh_cli.main", "trace", request_id, "--json",
                               "--state-dir", str(stack.mesh.state_dir)],
                              env=stack.mesh.env(), capture_output=True, text=True, timeout=60)
        if done.returncode == 0 and complete(tree := json.loads(done.stdout)):
            return tree
        if time.monotonic() > deadline:
            pytest.fail(f"ragmesh trace {request_id}: rc={done.returncode}\n{done.stderr}\n{done.stdout[:3000]}")
        time.sleep(0.5)


def walk(nodes: list[dict]):
    for node in nodes:
        yield node
        yield from walk(node["children"])


def servers(tree: dict) -> list[dict]:
    return [node for node in tree["spans"] if node["kind"] == "SERVER"]


async def test_a_failed_index_status_is_found_by_the_request_id_it_printed(stack: IndexerStack) -> None:
    done = await asyncio.to_thread(stack.cli, "index", "status", "--corpus", "nosuch@1")
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    printed = NOT_FOUND_LINE.match(line)
    assert printed, line
    request_id = printed.group(1)
    tree = await asyncio.to_thread(ragmesh_trace, stack, request_id)
    assert tree["request_id"] == request_id
    (status,) = servers(tree)
    assert (status["service"], status["operation"]) == ("ragmesh-indexer", "/ragmesh.v1.Indexer/Status")
    assert status["attributes"]["ragmesh.request_id"] == request_id
    # The CLI records no span of its own: the call's server span is shown at the top, marked so.
    assert status["parent_missing"] is True
    # The registry queries the call made sit under it.
    assert any(child["kind"] == "CLIENT" for child in status["children"]), status["children"]


async def test_a_callers_request_id_names_the_trace_of_every_call_of_the_command(stack: IndexerStack) -> None:
    async def status(corpus: str, request_id: str) -> subprocess.CompletedProcess:
        return await asyncio.to_thread(stack.cli, "index", "status", "--corpus", corpus, "--request-id", request_id)

    first = await status("nosuch@1", "ops-ticket-42")
    assert first.returncode == 2 and "(request id ops-ticket-42, in the indexer's log)" in first.stderr, first.stderr
    other = await status("nosuch@2", "ops-ticket-43")
    assert other.returncode == 2, other.stderr
    mine = await asyncio.to_thread(ragmesh_trace, stack, "ops-ticket-42")
    theirs = await asyncio.to_thread(ragmesh_trace, stack, "ops-ticket-43")
    assert [s["attributes"]["ragmesh.request_id"] for s in servers(mine)] == ["ops-ticket-42"]
    assert [s["attributes"]["ragmesh.request_id"] for s in servers(theirs)] == ["ops-ticket-43"]
    assert mine["trace_id"] != theirs["trace_id"]


@pytest.mark.timeout(600)
async def test_an_index_ci_run_is_one_trace_of_its_build_validate_and_promote(
        tmp_path: Path, runtime_url: str, pg_url: str, unique_schema) -> None:
    source = tmp_path / "corpus"
    shutil.copytree(ROOT / "tests" / "fixtures" / "e2e_corpus", source)
    stack = IndexerStack(tmp_path, runtime_url=runtime_url, pg_url=pg_url, schema=unique_schema("trci"))
    stack.start()
    try:
        ci = await asyncio.to_thread(stack.cli, "index", "ci", "--corpus", "traced@1", "--source", str(source),
                                     "--request-id", "ci-run-1")
        assert ci.returncode == 0, ci.stderr
        calls = ["/ragmesh.v1.Indexer/Build", "/ragmesh.v1.Indexer/Validate", "/ragmesh.v1.Indexer/Promote"]
        tree = await asyncio.to_thread(ragmesh_trace, stack, "ci-run-1",
                                       lambda t: [n["operation"] for n in servers(t)] == calls)
    finally:
        stack.stop()
        await stack.close()
    for call in servers(tree):
        assert call["service"] == "ragmesh-indexer" and call["attributes"]["ragmesh.request_id"] == "ci-run-1"
    # The build polled Status twice a second and the client checked health: none of it is here.
    operations = {node["operation"] for node in walk(tree["spans"])}
    assert not {op for op in operations if op.endswith(("/Status", "/Check"))}, operations
    # Under the calls, the work they did elsewhere: the store's calls, served by the retrieval process
    # (the session's model runtime records no spans: it was not started by the mesh).
    build, _validate, promote = servers(tree)
    for call in (build, promote):
        assert "ragmesh-retrieval" in {node["service"] for node in walk(call["children"])}, call["operation"]
