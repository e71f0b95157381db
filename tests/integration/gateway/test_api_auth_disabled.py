"""Authentication disabled (the embedded default): the internal index routes answer loopback callers
only, the start-up log says authentication is off, a request that shows a token is answered
``Ragmesh-Auth: disabled; token-not-checked``, and the server's own low-level refusals (a request
uvicorn cannot parse) are JSON with a code like every other error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from litestar.testing import AsyncTestClient

from gateway_auth import StaticAuthenticator
from gateway_mesh import Mesh
from loopback_server import serve
from gateway_process import gateway_env, running_gateway
from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.app import create_app
from ragmesh_gateway.composition import build_deps

INDEX = "/api/rag/v1/internal/index"
INTERNAL_CALLS = [
    ("POST", f"{INDEX}/build", {"corpus": "docs@1", "root": "/srv/docs"}),
    ("POST", f"{INDEX}/promote", {"corpus": "docs@1", "index_version": "v2"}),
    ("POST", f"{INDEX}/rollback", {"corpus": "docs@1"}),
    ("GET", f"{INDEX}/status?corpus=docs@1", None),
]


@pytest.mark.parametrize(("method", "path", "body"), INTERNAL_CALLS)
async def test_internal_routes_refuse_a_remote_caller_when_auth_is_off(
    client: AsyncTestClient, mesh: Mesh, method: str, path: str, body: dict | None
) -> None:
    # The test client's peer address is "testclient": not a loopback address.
    response = await client.request(method, path, json=body)
    assert response.status_code == 403, response.text
    assert response.json()["code"] == "PERMISSION_DENIED"
    assert "loopback" in response.json()["message"]
    assert mesh.indexer.requests == []


@pytest.mark.parametrize(("method", "path", "body"), INTERNAL_CALLS)
async def test_internal_routes_answer_a_loopback_caller_when_auth_is_off(
    mesh: Mesh, method: str, path: str, body: dict | None
) -> None:
    async with serve(create_app(mesh.settings())) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        response = await http.request(method, path, json=body)
    assert response.status_code == 200, response.text
    assert len(mesh.indexer.requests) == 1


async def test_public_routes_still_answer_a_remote_caller(client: AsyncTestClient) -> None:
    assert (await client.post("/api/rag/v1/search", json={"query": "quote"})).status_code == 200


def test_the_start_up_log_says_authentication_is_off(tmp_path: Path) -> None:
    with running_gateway(tmp_path, gateway_env()) as gateway:
        logs = gateway.logs()
    assert "authentication is disabled" in logs


def test_a_request_the_server_cannot_parse_is_json_with_a_code(tmp_path: Path) -> None:
    async def raw(url: str, data: bytes) -> bytes:
        parts = urlsplit(url)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        writer.write(data)
        await writer.drain()
        answer = await reader.read()
        writer.close()
        return answer

    with running_gateway(tmp_path, gateway_env()) as gateway:
        answers = [asyncio.run(raw(gateway.url, data)) for data in (
            b"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello on the plain port
            b"GET /\x00 HTTP/1.1\r\n\r\n",
        )]
    for answer in answers:
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), answer[:300]
        assert b"content-type: application/json" in head.lower(), head
        assert b'"code":"MALFORMED_REQUEST"' in body.replace(b" ", b""), body


# Every kind of route that asks the authenticator, with a request it answers (or refuses) at once.
TOKEN_ROUTES = [
    ("GET", "/api/rag/v1/corpora", None),
    ("POST", "/api/rag/v1/search", {"query": "quote"}),
    ("POST", "/v1/chat/completions", {"model": "ragmesh", "messages": [{"role": "user", "content": "quote?"}]}),
    ("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    INTERNAL_CALLS[3],  # refused (403: a remote caller), and still told its token was not checked
]
MCP_HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


@pytest.mark.parametrize(("method", "path", "body"), TOKEN_ROUTES, ids=lambda v: v if isinstance(v, str) else "")
async def test_a_token_sent_while_auth_is_off_is_answered_as_not_checked(
    client: AsyncTestClient, method: str, path: str, body: dict | None
) -> None:
    # `Bearer bogus` got 200 with nothing to say the token was ignored (issue 23).
    headers = {"Authorization": "Bearer bogus", **(MCP_HEADERS if path == "/mcp" else {})}
    answered = await client.request(method, path, json=body, headers=headers)
    assert answered.status_code in (200, 403), answered.text
    assert answered.headers["ragmesh-auth"] == "disabled; token-not-checked"
    plain = await client.request(method, path, json=body, headers=MCP_HEADERS if path == "/mcp" else {})
    assert plain.status_code == answered.status_code and "ragmesh-auth" not in plain.headers


async def test_a_token_the_gateway_checks_gets_no_such_header(mesh: Mesh) -> None:
    deps = build_deps(mesh.settings())
    deps.authenticator = StaticAuthenticator(Caller(principal="reader", readable_corpora=frozenset({"docs@1"})))
    async with AsyncTestClient(create_app(mesh.settings(), deps)) as checked:
        response = await checked.post("/api/rag/v1/search", json={"query": "quote"},
                                      headers={"Authorization": "Bearer rmk_x.y"})
    assert response.status_code == 200 and "ragmesh-auth" not in response.headers


async def test_a_browser_on_another_origin_may_read_the_header(mesh: Mesh) -> None:
    settings = mesh.settings(cors_origins=["https://site.example"])
    async with AsyncTestClient(create_app(settings)) as http:
        response = await http.post("/api/rag/v1/search", json={"query": "quote"},
                                   headers={"Authorization": "Bearer bogus", "Origin": "https://site.example"})
    assert "ragmesh-auth" in response.headers["access-control-expose-headers"].lower()
