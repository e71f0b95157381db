"""The pieces every bench smoke pass is built from (libs/ragmesh_bench/smoke.py)."""

from __future__ import annotations

import argparse
import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from ragmesh_bench.harness import RunningMesh
from ragmesh_bench.smoke import CANDIDATE_KEYS, parse_args, tiny_answer_set, tiny_beir, tiny_candidates


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--dataset", required=True)
    return p


def test_smoke_makes_required_options_optional_and_only_then() -> None:
    assert parse_args(parser(), ["--smoke"]).smoke is True
    assert parse_args(parser(), ["--dataset", "d"]).smoke is False
    with pytest.raises(SystemExit):
        parse_args(parser(), [])


def test_tiny_beir_qrels_name_documents_of_its_corpus(tmp_path) -> None:
    folder = tiny_beir(tmp_path / "beir")
    docs = {json.loads(line)["_id"] for line in (folder / "corpus.jsonl").read_text().splitlines()}
    queries = {json.loads(line)["_id"] for line in (folder / "queries.jsonl").read_text().splitlines()}
    for split in ("train", "validation", "dev", "test"):
        rows = [line.split("\t") for line in (folder / "qrels" / f"{split}.tsv").read_text().splitlines()[1:]]
        assert rows and {q for q, _, _ in rows} == queries and {d for _, d, _ in rows} <= docs
    hits = [json.loads(line)["hits"] for line in tiny_candidates(folder).read_text().splitlines()]
    assert len(hits) == len(queries) and all(set(CANDIDATE_KEYS) <= set(h) for row in hits for h in row)


def test_every_gold_answer_stands_in_the_file_it_names(tmp_path) -> None:
    folder = tiny_answer_set(tmp_path / "answers")
    rows = [json.loads(line) for line in (folder / "questions.jsonl").read_text().splitlines()]
    assert any(not r["answerable"] for r in rows)
    for row in (r for r in rows if r["answerable"]):
        text = (folder / "corpus" / row["file"]).read_text().lower()
        assert all(gold.lower() in text for gold in row["answers"]), row


def test_a_smoke_pass_without_a_mesh_says_which_variables_to_set() -> None:
    with pytest.raises(SystemExit, match="RAGMESH_URL"):
        RunningMesh.from_env({})


def test_waiting_for_a_server_that_exited_says_so_and_a_bench_script_exits() -> None:
    """wait_until_serving (the tests' and the drills' wait) names the exit; serve_on_free_port
    starts it once (the port was not taken), and serve (a bench script's) turns it into SystemExit
    with the same reason."""
    import subprocess
    import sys

    from ragmesh_bench.harness import NotServing, free_port, serve, serve_on_free_port, wait_until_serving

    url = f"http://127.0.0.1:{free_port()}/health"
    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    with pytest.raises(NotServing, match="exited with 3"):
        wait_until_serving(url, process=process, timeout=600)
    started: list[int] = []

    def start(port: int) -> subprocess.Popen:
        started.append(port)
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])

    with pytest.raises(NotServing, match="exited with 3"):
        serve_on_free_port(start, "/health", timeout=600)
    assert len(started) == 1
    with pytest.raises(SystemExit, match="exited with 3"):
        serve(start, "/health", timeout=600)


class Ok(BaseHTTPRequestHandler):
    """A server that answers 200 to everything."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@contextlib.contextmanager
def answering() -> Iterator[int]:
    """An :class:`Ok` server in a thread of this process; yields its port."""
    server = HTTPServer(("127.0.0.1", 0), Ok)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        server.server_close()


def test_waiting_for_a_server_that_answers_returns() -> None:
    from ragmesh_bench.harness import wait_until_serving

    with answering() as port:
        wait_until_serving(f"http://127.0.0.1:{port}/health/live", timeout=600)


def test_another_server_answering_on_the_port_is_not_taken_for_the_one_started() -> None:
    """A port free when chosen can be taken before the started server binds it (by another test's
    server): the answer on it then comes from a stranger, and the wait says whose it is."""
    import os
    import subprocess
    import sys

    from ragmesh_bench.harness import PortTaken, wait_until_serving

    started = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        with answering() as port, pytest.raises(
                PortTaken, match=rf"held by pid {os.getpid()} .*not the server started \(pid {started.pid}\)"):
            wait_until_serving(f"http://127.0.0.1:{port}/health", process=started, timeout=600)
    finally:
        started.kill()
        started.wait()
