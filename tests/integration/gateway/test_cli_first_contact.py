"""What a newcomer meets with the CLI against a running mesh (issue 23): the commands find the mesh
from the record in its state folder whatever its ports, an error names the address tried and how it
was chosen and the request id, `answer` and `search` read as text on a terminal and stay contract
JSON in a pipe, and the answer carries every index version it drew on.

The gateway is a real one (uvicorn) over the gRPC doubles; the CLI runs as its own process.
"""

from __future__ import annotations

import asyncio
import json
import os
import pty
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from gateway_mesh import Mesh
from gateway_process import free_port, gateway_env
from loopback_server import serve
from ragmesh_cli.mesh import record
from ragmesh_cli.mesh.lifecycle import StateFolder, identity
from ragmesh_gateway.app import create_app

OK, USAGE, UNAVAILABLE = 0, 2, 5
HEX_ID = re.compile(r"request id ([0-9a-f]{32})")


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


async def ragmesh(*args: str, cwd: Path | None = None, tty_stdout: bool = False, **env: str) -> Run:
    primary = replica = None
    if tty_stdout:
        primary, replica = pty.openpty()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "ragmesh_cli.main", *args, cwd=cwd, stdin=asyncio.subprocess.DEVNULL,
        stdout=replica if tty_stdout else asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env=gateway_env(COLUMNS="200", **env))
    try:
        if tty_stdout:
            os.close(replica)
            replica = None
            chunks: list[bytes] = []
            loop = asyncio.get_running_loop()
            while True:
                try:
                    chunk = await loop.run_in_executor(None, os.read, primary, 65536)
                except OSError:  # the other end closed
                    break
                if not chunk:
                    break
                chunks.append(chunk)
            _, stderr = await asyncio.wait_for(process.communicate(), 60)
            stdout = b"".join(chunks).replace(b"\r\n", b"\n")
        else:
            stdout, stderr = await asyncio.wait_for(process.communicate(), 60)
    finally:
        for fd in (primary, replica):
            if fd is not None:
                os.close(fd)
    return Run(process.returncode, stdout.decode(), stderr.decode())


def mesh_folder(folder: Path, gateway_url: str, indexer_addr: str, owner: dict | None = None) -> Path:
    """A state folder as `ragmesh up` leaves it while serving: marker and mesh record."""
    StateFolder(folder).claim()
    record.write(folder, record.MeshRecord(
        gateway_url=gateway_url, grpc={"indexer": indexer_addr, "retrieval": "127.0.0.1:1", "rerank": "127.0.0.1:1",
                                       "generation": "127.0.0.1:1"},
        runtime_url="http://127.0.0.1:1", owner=owner or identity(os.getpid()), port_base=27000))
    return folder


def indexer_of(mesh: Mesh) -> str:
    return f"127.0.0.1:{mesh.servers['indexer'].port}"


def one_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in text, text
    return lines[0]


async def test_the_commands_find_the_mesh_from_its_state_folder(mesh: Mesh, tmp_path: Path) -> None:
    # After `ragmesh up --port-base 27000` main's `ragmesh search` went to 127.0.0.1:8080 and failed.
    async with serve(create_app(mesh.settings())) as url:
        state = mesh_folder(tmp_path / ".ragmesh-state", url, indexer_of(mesh))
        here = await ragmesh("search", "how do I start?", cwd=tmp_path)  # the default folder, unchanged
        named = await ragmesh("answer", "how do I start?", "--state-dir", str(state))
        from_env = await ragmesh("corpora", RAGMESH_STATE_DIR=str(state))
        indexer = await ragmesh("index", "status", "--corpus", "docs@1", cwd=tmp_path)
        remove = await ragmesh("corpus", "remove", "docs@1", "--dry-run", "--state-dir", str(state))
        printed = await ragmesh("url", cwd=tmp_path)
        printed_indexer = await ragmesh("url", "indexer", "--state-dir", str(state))
    assert [r.code for r in (here, named, from_env, indexer, remove, printed, printed_indexer)] == [OK] * 7, [
        r.stderr for r in (here, named, from_env, indexer, remove, printed, printed_indexer)]
    assert json.loads(here.stdout)["results"] and json.loads(named.stdout)["answer"] == "Grounded answer [S1]."
    assert json.loads(indexer.stdout)["corpus"] == "docs@1"
    assert printed.stdout == f"{url}\n" and printed_indexer.stdout == f"{indexer_of(mesh)}\n"


async def test_a_query_to_the_mesh_of_a_state_folder_notes_its_request_id_there(mesh: Mesh, tmp_path: Path) -> None:
    """Beside the span file, for `ragmesh trace --last` to wait for (ragmesh_cli.last_request); a
    gateway named by --url is no mesh of the folder, and nothing is noted."""
    noted = tmp_path / ".ragmesh-state" / "traces" / "last-request.json"
    async with serve(create_app(mesh.settings())) as url:
        state = mesh_folder(tmp_path / ".ragmesh-state", url, indexer_of(mesh))
        noted.parent.mkdir()
        by_url = await ragmesh("search", "how do I start?", "--url", url, cwd=tmp_path)
        assert by_url.code == OK and not noted.exists()
        searched = await ragmesh("search", "how do I start?", "--state-dir", str(state))
        assert searched.code == OK and json.loads(noted.read_text())["request_id"] == json.loads(searched.stdout)["request_id"]
        answered = await ragmesh("answer", "how do I start?", cwd=tmp_path)
        assert answered.code == OK and json.loads(noted.read_text())["request_id"] == json.loads(answered.stdout)["request_id"]
    # A request that never reached a gateway is not waited for.
    closed = mesh_folder(tmp_path / "closed", f"http://127.0.0.1:{free_port()}", indexer_of(mesh))
    (closed / "traces").mkdir()
    refused = [await ragmesh(command, "how do I start?", "--state-dir", str(closed)) for command in ("search", "answer")]
    assert [r.code for r in refused] == [UNAVAILABLE] * 2, [r.stderr for r in refused]
    assert not (closed / "traces" / "last-request.json").exists()


async def test_an_explicit_url_or_address_wins_over_the_record(mesh: Mesh, tmp_path: Path) -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    mesh_folder(tmp_path / ".ragmesh-state", closed, f"127.0.0.1:{free_port()}")
    async with serve(create_app(mesh.settings())) as url:
        flag = await ragmesh("search", "q", "--url", url, cwd=tmp_path)
        env = await ragmesh("search", "q", cwd=tmp_path, RAGMESH_URL=url)
        addr = await ragmesh("index", "status", "--corpus", "docs@1", "--addr", indexer_of(mesh), cwd=tmp_path)
    assert [flag.code, env.code, addr.code] == [OK] * 3, [flag.stderr, env.stderr, addr.stderr]


async def test_an_unreachable_gateway_or_indexer_is_named_with_how_it_was_chosen(tmp_path: Path) -> None:
    # main said `UNAVAILABLE: gateway unreachable at http://127.0.0.1:8080` and, for the indexer,
    # `UNAVAILABLE: indexer failed: UNAVAILABLE`: neither which address nor why that one.
    closed, closed_addr = f"http://127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    state = mesh_folder(tmp_path / "state", closed, closed_addr)
    by_flag = await ragmesh("search", "q", "--url", closed, cwd=tmp_path)
    by_env = await ragmesh("answer", "q", cwd=tmp_path, RAGMESH_URL=closed)
    by_record = await ragmesh("search", "q", "--state-dir", str(state))
    by_default = await ragmesh("corpora", cwd=tmp_path)
    indexer = await ragmesh("index", "status", "--corpus", "a@1", "--timeout", "3", "--state-dir", str(state))
    assert [r.code for r in (by_flag, by_env, by_record, by_default, indexer)] == [UNAVAILABLE] * 5
    assert closed in one_line(by_flag.stderr) and "--url" in by_flag.stderr
    assert closed in one_line(by_env.stderr) and "$RAGMESH_URL" in by_env.stderr
    assert closed in one_line(by_record.stderr) and f"mesh record in {state}" in by_record.stderr
    assert "127.0.0.1:8080" in one_line(by_default.stderr) and "default" in by_default.stderr
    assert closed_addr in one_line(indexer.stderr) and f"mesh record in {state}" in indexer.stderr


async def test_a_state_folder_that_names_no_live_mesh_is_one_clear_line(tmp_path: Path) -> None:
    not_ours = tmp_path / "photos"
    not_ours.mkdir()
    (not_ours / "cat.jpg").write_bytes(b"\xff\xd8")
    stopped = tmp_path / "stopped"
    StateFolder(stopped).claim()  # a mesh's folder after `ragmesh down`: no record
    # The record of a mesh whose `ragmesh up` was killed: that pid started long ago, so it is not this one.
    gone = mesh_folder(tmp_path / "gone", f"http://127.0.0.1:{free_port()}", "127.0.0.1:1",
                       owner={"pid": os.getpid(), "started": 1.0})
    home = tmp_path / "home"
    home.mkdir()
    mesh_folder(home / ".ragmesh-state", f"http://127.0.0.1:{free_port()}", "127.0.0.1:1",
                owner={"pid": os.getpid(), "started": 1.0})
    bad_format = mesh_folder(tmp_path / "future", "http://127.0.0.1:1", "127.0.0.1:1")
    (bad_format / "run" / "mesh.json").write_text('{"format": 99}', encoding="utf-8")
    runs = {
        "missing": await ragmesh("search", "q", "--state-dir", str(tmp_path / "nowhere")),
        "not_ours": await ragmesh("answer", "q", "--state-dir", str(not_ours)),
        "stopped": await ragmesh("index", "ci", "--corpus", "a@1", "--state-dir", str(stopped)),
        "gone": await ragmesh("search", "q", RAGMESH_STATE_DIR=str(gone)),
        "gone_here": await ragmesh("corpus", "remove", "a@1", "--dry-run", cwd=home),
        "future": await ragmesh("url", "--state-dir", str(bad_format)),
    }
    codes = {name: run.code for name, run in runs.items()}
    assert codes == {"missing": USAGE, "not_ours": USAGE, "stopped": UNAVAILABLE, "gone": UNAVAILABLE,
                     "gone_here": UNAVAILABLE, "future": USAGE}, {n: r.stderr for n, r in runs.items()}
    lines = {name: one_line(run.stderr) for name, run in runs.items()}
    assert "no state folder" in lines["missing"]
    assert "not a ragmesh state folder" in lines["not_ours"]
    assert "no mesh is running" in lines["stopped"] and "ragmesh up" in lines["stopped"]
    assert "is gone" in lines["gone"] and f"pid {os.getpid()}" in lines["gone"] and "--port-base 27000" in lines["gone"]
    assert "format 99" in lines["future"]
    assert all(run.stdout == "" for run in runs.values())


async def test_every_error_from_the_gateway_names_its_request_id(mesh: Mesh) -> None:
    # main printed `QUERY_EMPTY: ...` and `UNAVAILABLE: generation failed: ...` with no request id.
    mesh.generation.mode = "fail_mid"
    async with serve(create_app(mesh.settings())) as url:
        refused = await ragmesh("search", "", "--url", url)
        failed = await ragmesh("answer", "how do I start?", "--url", url)
    assert (refused.code, failed.code) == (USAGE, UNAVAILABLE)
    for run in (refused, failed):
        line = one_line(run.stderr)
        found = HEX_ID.search(line)
        assert found, line
        assert f"ragmesh trace {found.group(1)}" in line
    assert "QUERY_EMPTY" in refused.stderr and "the model runtime failed" in failed.stderr


async def test_answer_and_search_read_as_text_on_a_terminal_and_stay_json_elsewhere(mesh: Mesh) -> None:
    # main printed one JSON line on a terminal too.
    async with serve(create_app(mesh.settings())) as url:
        answer = await ragmesh("answer", "how do I start?", "--url", url, tty_stdout=True)
        search = await ragmesh("search", "how do I start?", "--top-k", "2", "--url", url, tty_stdout=True)
        forced = await ragmesh("answer", "how do I start?", "--url", url, "--json", tty_stdout=True)
        piped = await ragmesh("answer", "how do I start?", "--url", url)
    assert [r.code for r in (answer, search, forced, piped)] == [OK] * 4, [answer.stderr, search.stderr]
    lines = answer.stdout.splitlines()
    assert lines[0] == "Grounded answer [S1]."
    assert "[S1] guide/page6.md lines 6-9 — Guide > Part 6  (docs@1)" in lines
    assert "    https://docs.example/page6" in lines
    assert re.fullmatch(r"\(answered; index v1; request [0-9a-f]{32}\)", lines[-1]), lines[-1]
    assert search.stdout.splitlines()[:4] == [
        "1. guide/page6.md lines 6-9 — Guide > Part 6  (docs@1)", "    \u201cquote number 6\u201d",
        "    https://docs.example/page6", "2. guide/page5.md lines 5-8 — Guide > Part 5  (docs@1)"]
    with pytest.raises(ValueError):
        json.loads(answer.stdout)
    assert json.loads(forced.stdout)["answer"] == json.loads(piped.stdout)["answer"] == "Grounded answer [S1]."


async def test_the_cli_answer_names_every_index_version(mesh: Mesh) -> None:
    # MCP's answer had index_versions; the CLI's had only index_version (null across two corpora).
    async with serve(create_app(mesh.settings())) as url:
        answer = await ragmesh("answer", "how do I start?", "--url", url)
    assert answer.code == OK, answer.stderr
    document = json.loads(answer.stdout)
    assert document["index_versions"] == ["v1"] and document["index_version"] == "v1"


@pytest.mark.parametrize("flag", [["--state-dir", "{state}"], ["--state-dir={state}"]])
async def test_token_and_access_take_the_state_folder_like_the_other_commands(tmp_path: Path, flag: list[str]) -> None:
    # main handed --state-dir on to the gateway's admin parser: `unrecognized arguments`.
    state = tmp_path / "state"
    StateFolder(state).claim()
    args = [part.format(state=state) for part in flag]
    listed = await ragmesh("token", "list", *args)
    granted = await ragmesh("access", "list", *args)
    for run in (listed, granted):
        assert run.code == USAGE and run.stdout == "", run.stderr
        assert f"no embedded PostgreSQL under {state}" in one_line(run.stderr)
