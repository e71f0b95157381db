"""The request's trace context and request id travel with every call to a model server.

Retrieval, rerank and generation call the model runtime (or TEI, or vLLM) over HTTP. Those calls
carry the W3C ``traceparent`` of the current span and ``X-Request-ID``, whether or not the httpx
instrumentation is on; before issue 15 they carried neither unless a trace exporter was configured,
so the runtime logged a trace id of its own and no request id.
"""

from __future__ import annotations

import asyncio
import io
import json
import logging

import httpx
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from ragmesh_common.clients.llm import ChatClient
from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.telemetry import JsonLogFormatter, bind_request_id, request_id_var

TRACER = TracerProvider().get_tracer("test")


class Recorder:
    def __init__(self) -> None:
        self.headers: list[httpx.Headers] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.headers.append(request.headers)
        if request.url.path.endswith("/models"):
            return httpx.Response(200, json={"object": "list", "data": [
                {"id": "m", "object": "model", "created": 0, "owned_by": "test"}]})
        return httpx.Response(200, json=[[0.1, 0.2]])


def trace_id_in(traceparent: str) -> int:
    version, trace_id, _span_id, _flags = traceparent.split("-")
    assert version == "00"
    return int(trace_id, 16)


async def in_request(request_id: str, call) -> int:
    token = request_id_var.set(request_id)
    try:
        with TRACER.start_as_current_span("handler") as span:
            await call()
            return span.get_span_context().trace_id
    finally:
        request_id_var.reset(token)


def test_the_embedding_and_rerank_client_sends_traceparent_and_request_id() -> None:
    recorder = Recorder()
    client = TeiClient("http://runtime", client=httpx.AsyncClient(base_url="http://runtime",
                                                                  transport=httpx.MockTransport(recorder)))
    trace_id = asyncio.run(in_request("req-embed", lambda: client.embed(["text"])))
    (headers,) = recorder.headers
    assert headers["x-request-id"] == "req-embed"
    assert trace_id_in(headers["traceparent"]) == trace_id


def test_the_chat_client_sends_traceparent_and_request_id() -> None:
    recorder = Recorder()
    http = httpx.AsyncClient(transport=httpx.MockTransport(recorder))
    client = ChatClient("http://runtime/v1", "", http_client=http)
    trace_id = asyncio.run(in_request("req-chat", client.resolve_model))
    (headers,) = recorder.headers
    assert headers["x-request-id"] == "req-chat"
    assert trace_id_in(headers["traceparent"]) == trace_id


def test_outside_a_request_no_request_id_is_sent() -> None:
    recorder = Recorder()
    client = TeiClient("http://runtime", client=httpx.AsyncClient(base_url="http://runtime",
                                                                  transport=httpx.MockTransport(recorder)))
    asyncio.run(client.embed(["text"]))
    assert "x-request-id" not in recorder.headers[0]


def _log_within(scope_headers: list[tuple[bytes, bytes]]) -> dict:
    """One log line written while an ASGI app wrapped by bind_request_id serves a request."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonLogFormatter("runtime"))
    logger = logging.getLogger("test.request_context")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)

    async def app(scope, receive, send) -> None:
        logger.info("inside")

    try:
        asyncio.run(bind_request_id(app)({"type": "http", "headers": scope_headers}, None, None))
    finally:
        logger.removeHandler(handler)
    assert request_id_var.get() == ""  # bound for the request only
    return json.loads(out.getvalue())


def test_a_server_binds_the_callers_request_id_to_its_log_lines() -> None:
    assert _log_within([(b"x-request-id", b"req-42")])["request_id"] == "req-42"


def test_a_malformed_request_id_is_not_logged() -> None:
    for bad in (b"", b"a" * 200, b"req\nforged", b"-leading-dash"):
        assert "request_id" not in _log_within([(b"x-request-id", bad)]), bad
