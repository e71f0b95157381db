"""The benches' load client (ragmesh_bench.lean_http) against a raw HTTP/1.1 server: the bodies it
reads, the errors it raises, and that it reuses a kept-alive connection."""

from __future__ import annotations

import asyncio
import json

import pytest

from ragmesh_bench.lean_http import LeanClient, LeanHttpError, lean_client


async def _server(answers: list[bytes]):
    """Answers each request with the next raw response; counts connections and keeps requests."""
    seen = {"connections": 0, "requests": []}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        while answers:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                break
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            seen["requests"].append((head, await reader.readexactly(length)))
            answer = answers.pop(0)
            writer.write(answer)
            await writer.drain()
            if b"Connection: close" in answer:
                break
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen


def ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + extra + \
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body


async def test_json_bodies_in_both_framings_over_one_kept_alive_connection() -> None:
    chunked = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"b\"\r\n3\r\n: 2\r\n1\r\n}\r\n0\r\n\r\n"
    server, url, seen = await _server([ok(b'{"a": 1}'), chunked])
    async with server, lean_client(url) as client:
        assert await client.post_json("/api/x", {"query": "q"}, headers={"X-Request-ID": "r1"}) == {"a": 1}
        assert await client.post_json("/api/x", {"query": "r"}) == {"b": 2}
    assert seen["connections"] == 1
    head, body = seen["requests"][0]
    assert head.startswith(b"POST /api/x HTTP/1.1\r\n") and b"X-Request-ID: r1\r\n" in head
    assert json.loads(body) == {"query": "q"}


async def test_a_non_2xx_raises_with_its_status_and_body() -> None:
    server, url, _ = await _server([b"HTTP/1.1 422 Unprocessable\r\nContent-Length: 17\r\n\r\n{\"code\": \"EMPTY\"}"])
    async with server, lean_client(url) as client:
        with pytest.raises(LeanHttpError) as exc:
            await client.post_json("/api/x", {})
    assert exc.value.status == 422 and b"EMPTY" in exc.value.body


async def test_a_closed_connection_is_not_reused() -> None:
    server, url, seen = await _server([ok(b"[1]", b"Connection: close\r\n"), ok(b"[2]")])
    async with server, lean_client(url) as client:
        assert await client.post_json("/", {}) == [1]
        assert await client.post_json("/", {}) == [2]
    assert seen["connections"] == 2


async def test_a_server_that_hangs_up_without_answering_is_an_error() -> None:
    server, url, _ = await _server([])
    async with server, lean_client(url) as client:
        with pytest.raises(LeanHttpError, match="closed before a response"):
            await client.post_json("/", {})


async def _hanging_up_server(answered_per_connection: int, *, read_before_hanging_up: bool):
    """Each connection answers ``answered_per_connection`` requests with keep-alive, then closes:
    while idle (as uvicorn's keep-alive timeout does), or after reading one more request."""
    seen = {"connections": 0, "requests": 0}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        for _ in range(answered_per_connection):
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(next(line.split(b":")[1] for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length")))
            await reader.readexactly(length)
            seen["requests"] += 1
            writer.write(ok(str(seen["requests"]).encode()))
            await writer.drain()
        if read_before_hanging_up:
            await reader.readuntil(b"\r\n\r\n")
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen


async def test_a_connection_the_server_closed_while_idle_is_not_an_error() -> None:
    # mesh_overhead's 16-client fresh pass lost a search this way: uvicorn had closed a connection
    # left idle during the in-process passes, and the client reused it.
    server, url, seen = await _hanging_up_server(1, read_before_hanging_up=False)
    async with server, lean_client(url) as client:
        assert await client.post_json("/", {}) == 1
        await asyncio.sleep(0.05)  # the server's FIN has arrived
        assert await client.post_json("/", {}) == 2
    assert seen["connections"] == 2


async def test_a_request_the_closing_server_dropped_is_sent_again_on_a_new_connection() -> None:
    # The race: the request went out on a reused connection as the server closed it.
    server, url, seen = await _hanging_up_server(1, read_before_hanging_up=True)
    async with server, lean_client(url) as client:
        assert await client.post_json("/", {}) == 1
        assert await client.post_json("/", {}) == 2
    assert seen["connections"] == 2


async def test_a_new_connection_closed_before_a_response_is_not_retried() -> None:
    server, url, seen = await _hanging_up_server(0, read_before_hanging_up=True)
    async with server, lean_client(url) as client:
        with pytest.raises(LeanHttpError, match="closed before a response"):
            await client.post_json("/", {})
    assert seen["connections"] == 1


def test_only_plain_http_urls() -> None:
    with pytest.raises(ValueError):
        LeanClient("https://example.org")
