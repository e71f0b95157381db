"""The runtime as it is deployed: `python -m ragmesh_runtime` under uvicorn, talked to by the
clients the mesh uses (httpx for TEI, the openai SDK for chat), stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import httpx
import numpy as np
import openai
import pytest
from runtime_chat_helpers import evidence_message

from ragmesh_bench.harness import NotServing, serve_on_free_port

MODEL = "ragmesh-extractive-v1-not-an-llm"


class RuntimeProcess:
    def __init__(self, process: subprocess.Popen, base_url: str, log_path: Path) -> None:
        self.process = process
        self.base_url = base_url
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def runtime(tmp_path_factory) -> Iterator[RuntimeProcess]:
    log_path = tmp_path_factory.mktemp("runtime") / "runtime.log"

    def start(port: int) -> subprocess.Popen:
        env = {**os.environ, "RAGMESH_RUNTIME_PORT": str(port), "RAGMESH_RUNTIME_HOST": "127.0.0.1"}
        with open(log_path, "ab") as log_file:
            return subprocess.Popen(
                [sys.executable, "-m", "ragmesh_runtime"], env=env, stdout=log_file, stderr=subprocess.STDOUT
            )

    try:  # generous: CI machines share two cores between many processes
        port, process = serve_on_free_port(start, "/health", timeout=90)
    except NotServing as exc:
        pytest.fail(f"{exc}:\n{log_path.read_text(errors='replace')}")
    runtime = RuntimeProcess(process, f"http://127.0.0.1:{port}", log_path)
    yield runtime
    if process.poll() is None:
        process.kill()
        process.wait()


def test_tei_embed_over_http(runtime):
    response = httpx.post(
        f"{runtime.base_url}/embed",
        json={"inputs": ["A man is eating food.", "A man is eating a piece of bread."], "truncate": True},
        timeout=30,
    )
    assert response.status_code == 200
    vectors = np.array(response.json())
    assert vectors.shape == (2, 384)
    assert vectors[0] @ vectors[1] > 0.7


def test_openai_sdk_lists_models_and_reads_a_non_streamed_answer(runtime):
    client = openai.OpenAI(base_url=f"{runtime.base_url}/v1", api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list().data] == [MODEL]
    completion = client.chat.completions.create(
        model=MODEL,
        messages=[
            {"role": "system", "content": "rules"},
            {
                "role": "user",
                "content": evidence_message(
                    [("S1", "The runtime listens on port 8091.")], "Which port does the runtime listen on?"
                ),
            },
        ],
    )
    assert completion.model == MODEL
    assert completion.choices[0].message.content == "The runtime listens on port 8091. [S1]"
    assert completion.usage is not None and completion.usage.completion_tokens > 0


def test_openai_sdk_streams_an_answer(runtime):
    client = openai.OpenAI(base_url=f"{runtime.base_url}/v1", api_key="unused", max_retries=0)
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[
            {
                "role": "user",
                "content": evidence_message(
                    [("S4", "Qdrant stores the vectors.")], "Where are vectors stored?"
                ),
            }
        ],
        max_tokens=64,
        temperature=0.0,
        stream=True,
        stream_options={"include_usage": True},
    )
    pieces, finish_reasons, usage = [], [], None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish_reasons.append(choice.finish_reason)
    assert "".join(pieces) == "Qdrant stores the vectors. [S4]"
    assert finish_reasons[-1] == "stop"
    assert usage is not None and usage.completion_tokens == len([p for p in pieces if p])


def test_openai_sdk_sees_a_bad_request_error(runtime):
    client = openai.OpenAI(base_url=f"{runtime.base_url}/v1", api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=0
        )


def test_sigterm_stops_the_process_cleanly(runtime):
    runtime.process.send_signal(signal.SIGTERM)
    # uvicorn drains, runs the shutdown hooks, then re-raises the signal it caught, so the exit
    # status says "terminated by SIGTERM" (0 with older uvicorn); the log shows the clean path.
    assert runtime.process.wait(timeout=30) in (0, -signal.SIGTERM)
    log = runtime.log()
    assert "Application shutdown complete" in log
    assert "Finished server process" in log
    assert "Traceback" not in log
