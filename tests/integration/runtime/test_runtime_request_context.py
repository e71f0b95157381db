"""The runtime's log lines for a request carry the caller's trace id and request id (issue 15).

Retrieval, rerank and generation send ``traceparent`` and ``X-Request-ID`` with each call; before this
issue the runtime logged a trace id of its own and no request id, so its lines could not be joined
to the request that caused them.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from runtime_chat_helpers import chat_body

from ragmesh_common.telemetry import JsonLogFormatter

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = {"traceparent": f"00-{TRACE_ID}-00f067aa0ba902b7-01", "x-request-id": "req-runtime-1"}
SOURCES = [("S1", "Quokka workers report a heartbeat every ten seconds.")]
QUESTION = "How often do Quokka workers report heartbeats?"


@pytest.fixture
def runtime_log_lines() -> Iterator[io.StringIO]:
    """The runtime's log lines as its process writes them (JSON, formatted while the request runs)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonLogFormatter("runtime"))
    logger = logging.getLogger("ragmesh_runtime")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield out
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def answer_lines(out: io.StringIO) -> list[dict]:
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    return [line for line in lines if line["msg"].startswith("extractive answer")]


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_is_logged_with_the_callers_trace_id_and_request_id(client, runtime_log_lines, stream) -> None:
    response = client.post("/v1/chat/completions", json=chat_body(SOURCES, QUESTION, stream=stream), headers=CALLER)
    assert response.status_code == 200
    (line,) = answer_lines(runtime_log_lines)
    assert line["trace_id"] == TRACE_ID and line["request_id"] == "req-runtime-1"


def test_a_call_without_a_request_id_logs_none(client, runtime_log_lines) -> None:
    response = client.post("/v1/chat/completions", json=chat_body(SOURCES, QUESTION))
    assert response.status_code == 200
    (line,) = answer_lines(runtime_log_lines)
    assert "request_id" not in line
