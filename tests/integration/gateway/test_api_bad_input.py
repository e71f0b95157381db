"""Hostile input beyond bodies (see test_api_errors.py): malformed tokens, odd methods, bad bytes in
paths and garbage on /mcp. Always a stable 4xx with a ``code``, never a 500 or a stack trace."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import httpx
import pytest

from gateway_mesh import Mesh
from loopback_server import serve
from gateway_tokens import schema, token_app, tokens  # noqa: F401 - fixtures
from ragmesh_gateway.app import create_app

SEARCH = "/api/rag/v1/search"

MALFORMED_AUTHORIZATION = [
    b"Bearer",
    b"Bearer ",
    b"bearer      ",
    b"Bearer rmk_",
    b"Bearer rmk_zzzzzzzzzzzzzzzz_" + b"a" * 43,
    b"Bearer rmk_0123456789abcdef_" + b"a" * 42 + b"\xff",
    b"Bearer rmk_0123456789abcdef_" + b"a" * 4000,
    b"Bearer " + "\u00e9\u00e8".encode("latin-1"),
    b"Token abc",
    b"Basic Zm9vOmJhcg==",
    b"Bearer \x7f\x01",
    b"Bearer rmk_0123456789abcdef_" + b"a" * 43 + b" trailing",
    b"Bearer a b c",
]


async def raw_request(base_url: str, head: bytes, body: bytes = b"") -> tuple[int, bytes]:
    parts = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(head + b"\r\n" + body)
    await writer.drain()
    data = await reader.read()
    writer.close()
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


def assert_coded(status: int, body: bytes, expected: int) -> None:
    assert status == expected, body
    assert b'"code"' in body and b"Traceback" not in body


@pytest.mark.parametrize("authorization", MALFORMED_AUTHORIZATION)
async def test_malformed_tokens_are_401_with_a_challenge(
    mesh: Mesh, pg_url: str, schema: str, authorization: bytes
) -> None:
    async with serve(token_app(mesh, pg_url, schema, allow_anonymous=False)) as base_url:
        host = urlsplit(base_url).netloc.encode()
        body = b'{"query": "q"}'
        head = (b"POST " + SEARCH.encode() + b" HTTP/1.1\r\nHost: " + host + b"\r\nAuthorization: "
                + authorization + b"\r\nContent-Type: application/json\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\nConnection: close\r\n")
        status, answer = await raw_request(base_url, head, body)
    assert_coded(status, answer, 401)
    assert b"UNAUTHENTICATED" in answer


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"BREW /api/rag/v1/search HTTP/1.1", 405),
        (b"PUT /api/rag/v1/corpora HTTP/1.1", 405),
        (b"GET /api/rag/v1/files/docs@1/%ff%fe.md HTTP/1.1", 404),
        (b"GET /api/rag/v1/files/docs@1/%c0%ae%c0%ae/x.md HTTP/1.1", 404),
        (b"GET /api/rag/v1/%ff HTTP/1.1", 404),
        (b"GET /api/rag/v1/internal/index/status?corpus= HTTP/1.1", 400),
    ],
)
async def test_odd_methods_and_bytes_in_paths(mesh: Mesh, head: bytes, expected: int) -> None:
    async with serve(create_app(mesh.settings())) as base_url:
        host = urlsplit(base_url).netloc.encode()
        status, body = await raw_request(base_url, head + b"\r\nHost: " + host + b"\r\nConnection: close\r\n")
    assert_coded(status, body, expected)


@pytest.mark.parametrize(
    "body",
    [b"not json", b"{}", b'{"jsonrpc": "2.0"}', b'{"jsonrpc": "2.0", "id": 1, "method": 12}', b"\xff\xfe", b"[]"],
)
async def test_garbage_on_mcp_is_a_4xx(mesh: Mesh, body: bytes) -> None:
    async with serve(create_app(mesh.settings())) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            response = await http.post(
                "/mcp", content=body,
                headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
            )
    assert 400 <= response.status_code < 500, response.text
    assert "Traceback" not in response.text


async def test_a_huge_body_on_mcp_is_refused(mesh: Mesh) -> None:
    payload = b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"a" * 200_000 + b'"}}'
    async with serve(create_app(mesh.settings())) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            response = await http.post(
                "/mcp", content=payload,
                headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
            )
    assert response.status_code == 413
