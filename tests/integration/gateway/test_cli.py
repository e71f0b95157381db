"""`ragmesh search|get|answer|corpora` against a real gateway (uvicorn, gRPC doubles downstream).

The contract: stdout carries only contract JSON (one object), diagnostics go to stderr; exit codes
0 ok, 2 bad arguments, 3 auth failure, 4 no evidence, 5 unavailable; never reads a terminal.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import sys
import time
import uuid
from dataclasses import dataclass

import pytest

from gateway_mesh import Mesh, chunk_id
from loopback_server import serve
from gateway_process import free_port, gateway_env
from gateway_tokens import schema, token_app, tokens  # noqa: F401 - fixtures
from ragmesh_gateway.app import create_app

OK, USAGE, AUTH, NO_EVIDENCE, UNAVAILABLE = 0, 2, 3, 4, 5


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> dict:
        lines = self.stdout.splitlines()
        assert len(lines) == 1, self.stdout  # exactly one JSON document, nothing else
        return json.loads(lines[0])


async def ragmesh(*args: str, env: dict[str, str] | None = None, tty_stdin: bool = False) -> Run:
    started = time.monotonic()
    primary = replica = None
    if tty_stdin:
        primary, replica = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ragmesh_cli.main", *args,
        stdin=replica if tty_stdin else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=env or gateway_env(),
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    finally:
        for fd in (primary, replica):
            if fd is not None:
                os.close(fd)
    return Run(process.returncode, stdout.decode(), stderr.decode(), time.monotonic() - started)


def assert_untrusted(document: dict, items: str) -> None:
    assert document["security"]["trust"] == "untrusted" and "notice" in document["security"]
    assert document[items] and all(item["trust"] == "untrusted" for item in document[items])


async def test_successful_commands_print_contract_json_and_exit_0(mesh: Mesh) -> None:
    async with serve(create_app(mesh.settings())) as url:
        search = await ragmesh("search", "how do I start?", "--top-k", "2", "--url", url)
        get = await ragmesh("get", chunk_id(3), "--index-version", "v1", "--url", url)
        answer = await ragmesh("answer", "how do I start?", "--url", url)
        corpora = await ragmesh("corpora", "--url", url)
    assert [r.code for r in (search, get, answer, corpora)] == [OK] * 4, [r.stderr for r in (search, get, answer)]
    assert len(search.json()["results"]) == 2
    assert_untrusted(search.json(), "results")
    assert_untrusted(get.json(), "chunks")
    answered = answer.json()
    assert answered["answer"] == "Grounded answer [S1]." and answered["answer_status"] == "answered"
    assert answered["trust"] == "untrusted"
    assert_untrusted(answered, "sources")
    assert [c["corpus"] for c in corpora.json()["corpora"]] == ["docs@1"]


async def test_corpora_says_why_a_corpus_is_keyword_only(mesh: Mesh) -> None:
    reason = "index built by a@1 (int8); embedding now served by b@2 (float16); not declared compatible"
    mesh.retrieval.corpora[0].embedder = "a@1 (int8)"
    mesh.retrieval.corpora[0].search = "keyword_only"
    mesh.retrieval.corpora[0].keyword_only_reason = reason
    async with serve(create_app(mesh.settings())) as url:
        corpora = await ragmesh("corpora", "--url", url)
    assert corpora.code == OK, corpora.stderr
    [listed] = corpora.json()["corpora"]
    assert (listed["embedder"], listed["search"], listed["keyword_only_reason"]) == ("a@1 (int8)", "keyword_only", reason)
    assert f"docs@1 is searched by keywords only: {reason}" in corpora.stderr


async def test_no_evidence_exits_4_with_the_json_still_on_stdout(mesh: Mesh) -> None:
    async with serve(create_app(mesh.settings())) as url:
        search = await ragmesh("search", "anything", "--corpus", "ghost@1", "--url", url)
        answer = await ragmesh("answer", "anything", "--corpus", "ghost@1", "--url", url)
        get = await ragmesh("get", str(uuid.uuid4()), "--index-version", "v1", "--url", url)
    assert [r.code for r in (search, answer, get)] == [NO_EVIDENCE] * 3
    assert search.json()["results"] == [] and get.json()["chunks"] == []
    assert answer.json()["answer_status"] == "insufficient_evidence"


async def test_bad_arguments_exit_2_with_nothing_on_stdout(mesh: Mesh) -> None:
    async with serve(create_app(mesh.settings())) as url:
        runs = [
            await ragmesh("search", "q", "--top-k", "500", "--url", url),  # over the server's cap
            await ragmesh("search", "", "--url", url),
            await ragmesh("get", "not-a-uuid", "--index-version", "v1", "--url", url),
            await ragmesh("search", "--url", url),  # no query at all
            await ragmesh("search", "q", "--top-k", "many"),
            await ragmesh("nonsense-command"),
        ]
    assert [r.code for r in runs] == [USAGE] * len(runs), [r.stderr for r in runs]
    assert all(r.stdout == "" for r in runs)
    assert "TOP_K_OUT_OF_RANGE" in runs[0].stderr and "QUERY_EMPTY" in runs[1].stderr
    assert "MALFORMED_CHUNK_ID" in runs[2].stderr


async def test_auth_failures_exit_3(mesh: Mesh, pg_url: str, schema: str, tokens: dict[str, str]) -> None:
    async with serve(token_app(mesh, pg_url, schema, allow_anonymous=False)) as url:
        missing = await ragmesh("search", "q", "--url", url)
        forged = await ragmesh("search", "q", "--url", url, "--token", "rmk_0123456789abcdef_" + "x" * 43)
        from_env = await ragmesh("corpora", "--url", url, env=gateway_env(RAGMESH_TOKEN="rmk_bad"))
        lacking_scope = await ragmesh("answer", "q", "--url", url, "--token", tokens["reader"])
        allowed = await ragmesh("search", "q", "--url", url, "--token", tokens["reader"])
    assert [r.code for r in (missing, forged, from_env, lacking_scope)] == [AUTH] * 4
    assert "UNAUTHENTICATED" in missing.stderr and "PERMISSION_DENIED" in lacking_scope.stderr
    assert all(r.stdout == "" for r in (missing, forged, from_env, lacking_scope))
    assert tokens["reader"] not in allowed.stdout + allowed.stderr
    assert allowed.code == OK


async def test_unavailable_exits_5(mesh: Mesh) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    unreachable = await ragmesh("search", "q", "--url", closed)
    answer_unreachable = await ragmesh("answer", "q", "--url", closed)
    await mesh.stop("retrieval")
    async with serve(create_app(mesh.settings())) as url:
        downstream = await ragmesh("search", "q", "--url", url)
    assert [r.code for r in (unreachable, answer_unreachable, downstream)] == [UNAVAILABLE] * 3
    assert "unreachable" in unreachable.stderr and "UNAVAILABLE" in downstream.stderr
    assert unreachable.stdout == downstream.stdout == ""


async def test_rate_limited_exits_5(mesh: Mesh, redis_url: str) -> None:
    settings = mesh.settings(
        redis_url=redis_url, rate_limits="search=0.01/1", rate_limit_prefix=f"ragmesh:test:{uuid.uuid4().hex}"
    )
    async with serve(create_app(settings)) as url:
        first = await ragmesh("search", "q", "--url", url)
        limited = await ragmesh("search", "q", "--url", url)
    assert (first.code, limited.code) == (OK, UNAVAILABLE)
    assert "RATE_LIMITED" in limited.stderr


async def test_the_timeout_is_the_callers_and_nothing_waits_on_a_terminal() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)  # accepts, never answers
        writer.close()

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        # stdin is a terminal: a command that prompted would hang here until the 60 s guard.
        run = await ragmesh("search", "q", "--url", url, "--timeout", "0.5", tty_stdin=True)
    finally:
        server.close()
    assert run.code == UNAVAILABLE and run.stdout == ""
    assert run.seconds < 15, run.seconds


@pytest.mark.parametrize("args", [["token", "list"], ["access", "list"]])
async def test_admin_commands_without_a_database_say_which_variable(args: list[str]) -> None:
    run = await ragmesh(*args, tty_stdin=True)
    assert run.code == USAGE and run.stdout == ""
    assert "RAGMESH_POSTGRES_URL" in run.stderr
