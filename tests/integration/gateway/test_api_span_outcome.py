"""The gateway's server span of a request says how it ended (issue 23, Build 7), through the real
Litestar app and its OpenTelemetry middleware: a stream's outcome, known only at its end, still
reaches the span; a 503 keeps its description. Before: a failed or degraded chat's root span said ok
(only the child Generation/Generate span was ERROR)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """(request id -> [HTTP status, last SSE event], request id -> its server span)."""
    trace_file = tmp_path_factory.mktemp("spans") / "spans.jsonl"
    env = {**os.environ, "RAGMESH_TRACE_FILE": str(trace_file), "PYTHONPATH": str(HERE)}
    done = subprocess.run([sys.executable, str(HERE / "gateway_outcome_probe.py")], env=env,
                          capture_output=True, timeout=120, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    spans = [json.loads(line) for line in trace_file.read_text().splitlines() if line.strip()]
    roots = {s["attributes"]["ragmesh.request_id"]: s for s in spans
             if s["kind"] == "SERVER" and "ragmesh.request_id" in s["attributes"]}
    return json.loads(done.stdout.strip().splitlines()[-1]), roots


def outcome(span: dict) -> tuple:
    attributes = span["attributes"]
    return (span["status"], span.get("status_message"), attributes.get("ragmesh.degraded"),
            attributes.get("error.type"))


def test_the_probe_got_the_answers_it_stands_for(outcomes) -> None:
    seen, _ = outcomes
    assert seen == {
        "whole-search": [200, ""], "whole-stream": [200, "done"], "degraded-search": [200, ""],
        "stream-error": [200, "error"], "bad-input": [400, ""], "stream-degraded": [200, "done"],
        "chat-degraded": [200, ""], "retrieval-down": [503, ""],
    }


def test_whole_answers_leave_the_root_span_unset(outcomes) -> None:
    _, roots = outcomes
    assert outcome(roots["whole-search"]) == ("UNSET", None, None, None)
    assert outcome(roots["whole-stream"]) == ("UNSET", None, None, None)


def test_degraded_answers_mark_the_root_span_with_their_flags(outcomes) -> None:
    _, roots = outcomes
    assert outcome(roots["degraded-search"]) == ("ERROR", "degraded: rerank", ["rerank"], "degraded")
    for request_id in ("stream-degraded", "chat-degraded"):  # generation down: the retrieval summary
        assert outcome(roots[request_id]) == ("ERROR", "degraded: generation", ["generation"], "degraded")


def test_an_error_event_at_the_end_of_a_stream_marks_the_root_span(outcomes) -> None:
    _, roots = outcomes
    assert outcome(roots["stream-error"]) == (
        "ERROR", "RUNTIME_ERROR: the model runtime failed", ["generation"], "RUNTIME_ERROR")


def test_a_503_keeps_its_code_and_message_on_the_root_span(outcomes) -> None:
    _, roots = outcomes
    status, message, degraded, error_type = outcome(roots["retrieval-down"])
    assert (status, degraded, error_type) == ("ERROR", None, "UNAVAILABLE")
    assert message.startswith("UNAVAILABLE: "), message


def test_a_callers_mistake_is_named_but_leaves_the_status_unset(outcomes) -> None:
    _, roots = outcomes
    assert outcome(roots["bad-input"]) == ("UNSET", None, None, "QUERY_EMPTY")
