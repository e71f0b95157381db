"""Hostile callers at the REST edge: text PostgreSQL cannot hold, wrong content types (the browser
"simple request" that needs no CORS preflight), cross-origin reads and huge bodies. Each is a 4xx
with a stable ``code`` in a JSON body, and nothing reaches a downstream service."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from litestar.testing import AsyncTestClient

from gateway_mesh import Mesh, running_mesh
from loopback_server import serve_in_thread
from ragmesh_gateway.app import create_app

API = "/api/rag/v1"
INDEX = f"{API}/internal/index"
JSON = {"content-type": "application/json"}

# Every JSON route with a body that would pass, so only the tested flaw can refuse it.
JSON_ROUTES = [
    (f"{API}/search", {"query": "quote"}),
    (f"{API}/chunks/batch-get", {"chunk_ids": ["00000000-0000-0000-0000-000000000001"], "index_version": "v1"}),
    (f"{API}/chat", {"question": "what is a quote?"}),
    (f"{API}/chat/stream", {"question": "what is a quote?"}),
    (f"{API}/feedback", {"request_id": "r1", "rating": 1}),
    (f"{INDEX}/build", {"corpus": "docs@1", "root": "/srv/docs"}),
    (f"{INDEX}/promote", {"corpus": "docs@1", "index_version": "v2"}),
    (f"{INDEX}/rollback", {"corpus": "docs@1"}),
]


def assert_coded(response: httpx.Response, status: int, code: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["code"] == code, response.text
    assert "Traceback" not in response.text


def downstream_calls(mesh: Mesh) -> int:
    return (len(mesh.retrieval.searches) + mesh.rerank.calls + len(mesh.generation.requests)
            + len(mesh.indexer.requests))


@dataclass
class Edge:
    """One gateway under uvicorn on 127.0.0.1 (a loopback caller may use the internal routes)."""

    mesh: Mesh
    url: str

    def post(self, path: str, **kwargs) -> tuple[httpx.Response, int]:
        """The answer, and how many downstream calls it caused."""
        before = downstream_calls(self.mesh)
        response = httpx.post(self.url + path, timeout=30, **kwargs)
        return response, downstream_calls(self.mesh) - before

    def get(self, path: str) -> tuple[httpx.Response, int]:
        before = downstream_calls(self.mesh)
        response = httpx.get(self.url + path, timeout=30)
        return response, downstream_calls(self.mesh) - before


@pytest.fixture(scope="module")
def edge() -> Iterator[Edge]:
    with running_mesh() as mesh, serve_in_thread(create_app(mesh.settings())) as url:
        yield Edge(mesh, url)


# --- text PostgreSQL cannot hold, and other control characters -------------------------------------

BAD_TEXT = ["nul\x00here", "bell\x07", "escape\x1b[31m", "del\x7f", "\x00"]


@pytest.mark.parametrize("text", BAD_TEXT)
@pytest.mark.parametrize(("path", "body", "field"), [
    (f"{API}/search", {"query": "q"}, "query"),
    (f"{API}/chat", {"question": "q"}, "question"),
    (f"{API}/feedback", {"request_id": "r1", "rating": 1}, "comment"),
    (f"{INDEX}/promote", {"corpus": "docs@1", "index_version": "v2"}, "reason"),
    (f"{INDEX}/rollback", {"corpus": "docs@1"}, "reason"),
])
def test_control_characters_in_a_body_are_refused_before_any_store(
    edge: Edge, path: str, body: dict, field: str, text: str
) -> None:
    response, calls = edge.post(path, json={**body, field: text})
    assert_coded(response, 400, "INVALID_CHARACTER")
    assert response.json()["details"]["path"] == f"$.{field}"
    assert calls == 0


async def test_a_nul_deep_inside_a_body_is_refused(client: AsyncTestClient, mesh: Mesh) -> None:
    response = await client.post(f"{API}/search", json={"query": "q", "filters": {"tags": ["ok", "b\x00d"]}})
    assert_coded(response, 400, "INVALID_CHARACTER")
    assert response.json()["details"]["path"] == "$.filters.tags[1]"
    assert downstream_calls(mesh) == 0


async def test_tabs_and_newlines_are_ordinary_text(client: AsyncTestClient) -> None:
    response = await client.post(f"{API}/search", json={"query": "first line\n\tsecond\r\n"})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("raw", [rb'{"query": "x\ud800y"}', rb'{"query": "\udc00"}', rb'{"query": "\ud83d"}'])
async def test_lone_surrogates_are_refused(client: AsyncTestClient, mesh: Mesh, raw: bytes) -> None:
    assert_coded(await client.post(f"{API}/search", content=raw, headers=JSON), 400, "INVALID_CHARACTER")
    assert downstream_calls(mesh) == 0


@pytest.mark.parametrize("value", ["%00", "docs%001", "%1b", "%ED%A0%80"])
def test_control_characters_in_a_query_parameter_are_refused(edge: Edge, value: str) -> None:
    response, calls = edge.get(f"{INDEX}/status?corpus={value}")
    assert_coded(response, 400, "INVALID_CHARACTER")
    assert calls == 0


# --- content types --------------------------------------------------------------------------------

@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=x", "application/jsonx", "text/json"])
@pytest.mark.parametrize(("path", "body"), JSON_ROUTES)
def test_json_routes_require_application_json(
    edge: Edge, path: str, body: dict, content_type: str | None
) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response, calls = edge.post(path, content=json.dumps(body).encode(), headers=headers)
    assert_coded(response, 415, "UNSUPPORTED_MEDIA_TYPE")
    assert calls == 0


@pytest.mark.parametrize(("path", "body"), JSON_ROUTES)
def test_the_same_bodies_as_application_json_get_through(edge: Edge, path: str, body: dict) -> None:
    # The control for the test above: with the right type each body passes the edge.
    response, _ = edge.post(path, json=body)
    assert response.status_code not in (400, 415), response.text


@pytest.mark.parametrize("content_type", ["application/json", "application/json; charset=utf-8",
                                          "Application/JSON;charset=UTF-8"])
async def test_application_json_with_parameters_is_accepted(client: AsyncTestClient, content_type: str) -> None:
    response = await client.post(f"{API}/search", content=b'{"query": "q"}', headers={"content-type": content_type})
    assert response.status_code == 200, response.text


# --- cross-origin ---------------------------------------------------------------------------------

async def test_cors_is_closed_unless_configured(client: AsyncTestClient) -> None:
    preflight = await client.options(f"{API}/search", headers={
        "origin": "https://evil.example", "access-control-request-method": "POST",
        "access-control-request-headers": "content-type"})
    assert "access-control-allow-origin" not in preflight.headers
    response = await client.post(f"{API}/search", json={"query": "q"}, headers={"origin": "https://evil.example"})
    assert "access-control-allow-origin" not in response.headers


async def test_configured_origins_get_cors_and_others_do_not(mesh: Mesh) -> None:
    app = create_app(mesh.settings(cors_origins=["https://docs.example"]))
    async with AsyncTestClient(app) as client:
        allowed = await client.options(f"{API}/search", headers={
            "origin": "https://docs.example", "access-control-request-method": "POST",
            "access-control-request-headers": "content-type"})
        other = await client.post(f"{API}/search", json={"query": "q"}, headers={"origin": "https://evil.example"})
    assert allowed.status_code in (200, 204)
    assert allowed.headers["access-control-allow-origin"] == "https://docs.example"
    assert other.headers.get("access-control-allow-origin") in (None, "https://docs.example")
    assert other.headers.get("access-control-allow-origin") != "https://evil.example"


# --- huge bodies ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [f"{API}/search", f"{INDEX}/build", "/mcp"])
def test_a_10_mb_body_is_a_coded_413(edge: Edge, path: str) -> None:
    body = b'{"query": "' + b"a" * (10 * 1024 * 1024) + b'"}'
    response, calls = edge.post(path, content=body, headers={**JSON, "accept": "application/json, text/event-stream"})
    assert_coded(response, 413, "BODY_TOO_LARGE")
    assert calls == 0


@pytest.mark.parametrize("body", [b"not json", b"{}", b'{"jsonrpc": "2.0", "id": 1, "method": 12}', b"\xff\xfe"])
def test_mcp_refusals_are_json_with_a_code(edge: Edge, body: bytes) -> None:
    response, _ = edge.post("/mcp", content=body, headers={**JSON, "accept": "application/json, text/event-stream"})
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"].startswith("application/json"), response.text
    assert response.json()["code"], response.text
