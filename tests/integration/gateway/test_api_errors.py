"""Bad input never reaches a 500: every malformed request gets a stable 4xx code and the same body shape."""

from __future__ import annotations

import httpx
import pytest
from litestar.testing import AsyncTestClient

from gateway_mesh import Mesh
from loopback_server import serve
from ragmesh_gateway.app import create_app

SEARCH = "/api/rag/v1/search"
JSON = {"content-type": "application/json"}


def assert_error(response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["code"] == code
    assert body["request_id"] == response.headers["x-request-id"] and body["message"]
    assert "Traceback" not in response.text and 'File "' not in response.text


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"query": "a"', "MALFORMED_BODY"),
        (b"not json at all", "MALFORMED_BODY"),
        (b"", "MALFORMED_BODY"),
        (b'{"query": "\xff\xfe\xfd"}', "MALFORMED_BODY"),
        (b"\xef\xbb\xbf\xff", "MALFORMED_BODY"),
        (b'{"query": 12}', "MALFORMED_BODY"),
        (b'{"query": ["a"]}', "MALFORMED_BODY"),
        (b'{"query": "a", "top_k": "8"}', "MALFORMED_BODY"),
        (b'{"query": "a", "top_k": null}', "MALFORMED_BODY"),
        (b'{"query": "a", "filters": []}', "MALFORMED_BODY"),
        (b'"just a string"', "MALFORMED_BODY"),
        (b'{"query": "a", "unknown": true}', "UNKNOWN_FIELD"),
        (b'{"query": "a", "filters": {"corpus": "x", "drop": 1}}', "UNKNOWN_FIELD"),
        (b'{"query": ""}', "QUERY_EMPTY"),
        (b'{"query": "   "}', "QUERY_EMPTY"),
        (b'{"query": "' + b"q" * 2001 + b'"}', "QUERY_TOO_LONG"),
        (b'{"query": "a", "top_k": 0}', "TOP_K_OUT_OF_RANGE"),
        (b'{"query": "a", "top_k": 1000}', "TOP_K_OUT_OF_RANGE"),
        (b'{"query": "a", "top_k": -5}', "TOP_K_OUT_OF_RANGE"),
    ],
)
async def test_search_bad_bodies(client: AsyncTestClient, raw: bytes, code: str) -> None:
    assert_error(await client.post(SEARCH, content=raw, headers=JSON), 400, code)


async def test_huge_body_is_413(client: AsyncTestClient) -> None:
    raw = b'{"query": "' + b"a" * (70 * 1024) + b'"}'
    assert_error(await client.post(SEARCH, content=raw, headers=JSON), 413, "BODY_TOO_LARGE")


async def test_huge_chunked_body_without_content_length_is_413(mesh: Mesh) -> None:
    async def chunks():
        yield b'{"query": "'
        for _ in range(80):
            yield b"a" * 1024

    async with serve(create_app(mesh.settings())) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
            response = await http.post(SEARCH, content=chunks(), headers=JSON)
    assert "content-length" not in response.request.headers
    assert_error(response, 413, "BODY_TOO_LARGE")


async def test_unknown_route_is_404(client: AsyncTestClient) -> None:
    assert_error(await client.get("/api/rag/v1/nothing-here"), 404, "ROUTE_NOT_FOUND")
    assert_error(await client.get("/widget/app.js"), 404, "ROUTE_NOT_FOUND")


async def test_wrong_method_is_405(client: AsyncTestClient) -> None:
    response = await client.get(SEARCH)
    assert_error(response, 405, "METHOD_NOT_ALLOWED")
    assert "POST" in response.headers["allow"]
    assert_error(await client.delete("/api/rag/v1/corpora"), 405, "METHOD_NOT_ALLOWED")


async def test_unexpected_exception_is_a_bare_500(mesh: Mesh) -> None:
    from gateway_fakes_bridge import exploding_app

    async with AsyncTestClient(exploding_app(mesh), raise_server_exceptions=False) as exploding:
        response = await exploding.post(SEARCH, json={"query": "boom"})
    assert_error(response, 500, "INTERNAL")
    assert response.json()["message"] == "internal error"
    assert "secret detail" not in response.text


async def test_index_admin_input_errors(client: AsyncTestClient) -> None:
    assert_error(
        await client.post("/api/rag/v1/internal/index/promote", json={"corpus": "docs@1"}),
        400,
        "MALFORMED_BODY",
    )
    assert_error(await client.get("/api/rag/v1/internal/index/status"), 400, "INVALID_ARGUMENT")
