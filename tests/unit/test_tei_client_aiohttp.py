"""The TEI client given a URL (aiohttp, what retrieval and rerank use) against a raw HTTP server:
what it sends, and the error codes it fails with, which must be those of the httpx path
(tests/unit/rerank/test_rerank_service.py, test_request_context_propagation.py)."""

from __future__ import annotations

import asyncio
import json

import pytest
from opentelemetry.sdk.trace import TracerProvider

from ragmesh_common.clients import PRIORITY_HEADER
from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import request_id_var

TRACER = TracerProvider().get_tracer("test")


async def _server(status: int = 200, body: bytes = b"[[0.6, 0.8]]", delay: float = 0.0):
    """Answers every request with ``status`` and ``body``; keeps each request's head and body."""
    seen: list[tuple[dict[str, str], bytes]] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        server.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:] if l)}
                headers[":request"] = lines[0]
                data = await reader.readexactly(int(headers.get("content-length", "0")))
                seen.append((headers, data))
                await asyncio.sleep(delay)
                writer.write(b"HTTP/1.1 %d X\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                             % (status, len(body), body))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    server.connections = 0
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen


async def test_it_posts_json_with_the_trace_context_request_id_and_priority() -> None:
    server, url, seen = await _server()
    client = TeiClient(url + "/", bulk=True)
    token = request_id_var.set("req-1")
    try:
        with TRACER.start_as_current_span("handler") as span:
            assert await client.embed(["a text"]) == [[0.6, 0.8]]
            trace_id = span.get_span_context().trace_id
    finally:
        request_id_var.reset(token)
        await client.close()
        server.close()
    (headers, data), = seen
    assert headers[":request"] == "POST /embed HTTP/1.1"
    assert json.loads(data) == {"inputs": ["a text"], "normalize": True, "truncate": True}
    assert headers["content-type"] == "application/json"
    assert headers["x-request-id"] == "req-1" and headers[PRIORITY_HEADER.lower()] == "bulk"
    assert int(headers["traceparent"].split("-")[1], 16) == trace_id


async def test_one_connection_serves_consecutive_calls() -> None:
    server, url, seen = await _server(body=b'[{"index": 1, "score": 0.9}, {"index": 0, "score": 0.1}]')
    client = TeiClient(url)
    try:
        for _ in range(3):
            hits = await client.rerank("q", ["a", "b"])
    finally:
        await client.close()
        server.close()
    assert [h.index for h in hits] == [1, 0]
    assert len(seen) == 3 and server.connections == 1
    assert "x-request-id" not in seen[0][0]  # outside a request: no id


@pytest.mark.parametrize(("status", "body", "code"), [
    (422, b'{"error": "bad", "error_type": "Validation"}', ErrorCode.INVALID_ARGUMENT),
    (413, b"{}", ErrorCode.INVALID_ARGUMENT),
    (500, b"{}", ErrorCode.RUNTIME_ERROR),
    (200, b"not json", ErrorCode.RUNTIME_ERROR),
    (200, b'{"not": "a list"}', ErrorCode.RUNTIME_ERROR),
])
async def test_answers_it_cannot_use_fail_with_their_codes(status, body, code) -> None:
    server, url, _ = await _server(status, body)
    client = TeiClient(url)
    try:
        with pytest.raises(RagmeshError) as exc:
            await client.embed(["x"])
    finally:
        await client.close()
        server.close()
    assert exc.value.code is code


async def test_a_runtime_that_is_down_is_unavailable_and_a_slow_one_times_out() -> None:
    server, url, _ = await _server()
    server.close()
    await server.wait_closed()
    down = TeiClient(url)
    with pytest.raises(RagmeshError) as exc:
        await down.embed(["x"])
    assert exc.value.code is ErrorCode.UNAVAILABLE
    assert await down.health() is False
    await down.close()

    server, url, _ = await _server(delay=1.0)
    slow = TeiClient(url)
    try:
        with pytest.raises(RagmeshError) as exc:
            await slow.embed(["x"], timeout=0.1)
    finally:
        await slow.close()
        server.close()
    assert exc.value.code is ErrorCode.DEADLINE_EXCEEDED


def test_one_client_serves_calls_from_more_than_one_event_loop() -> None:
    # Scripts and tests call a client from successive asyncio.run loops; a session is per loop.
    from litestar import Litestar, post
    from loopback_server import serve_in_thread

    @post("/embed", status_code=200)
    async def embed(data: dict) -> list[list[float]]:
        return [[0.6, 0.8]]

    with serve_in_thread(Litestar([embed])) as url:
        client = TeiClient(url)
        first = asyncio.run(client.embed(["x"]))
        second = asyncio.run(client.embed(["y"]))
        asyncio.run(client.close())
    assert first == second == [[0.6, 0.8]]
