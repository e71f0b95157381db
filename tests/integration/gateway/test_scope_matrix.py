"""Every route and every MCP tool against every scope: allowed (200) or refused (403), nothing else.

Tokens carry exactly one scope each (plus one with none); a caller without a token is anonymous
site traffic, which may only chat and open what the chat cites (public corpora), and is asked for
a token (401) everywhere else. ``rag:admin``
implies every scope. The table must name every route the app serves under /api/rag/v1.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ragmesh_common.pg import create_pool

from gateway_mesh import Mesh, chunk_id
from loopback_server import serve
from gateway_tokens import bearer, schema, token_app  # noqa: F401 - fixtures
from ragmesh_gateway.access.token_store import TokenStore
from ragmesh_gateway.access.tokens import Scope

API = "/api/rag/v1"
ANONYMOUS = "anonymous"
NO_SCOPE = "none"
COLUMNS = [*(s.value for s in Scope), NO_SCOPE, ANONYMOUS]
INDEX_SCOPES = {Scope.INDEX_BUILD.value, Scope.INDEX_PROMOTE.value}

# (method, route template) -> (concrete path, JSON body, scopes that may call it)
ROUTES: dict[tuple[str, str], tuple[str, dict | None, set[str]]] = {
    ("POST", "/search"): ("/search", {"query": "q"}, {"rag:search"}),
    ("POST", "/chunks/batch-get"): ("/chunks/batch-get", {"chunk_ids": [chunk_id(1)]}, {"rag:read"}),
    ("POST", "/chat"): ("/chat", {"question": "q"}, {"rag:answer", ANONYMOUS}),
    ("POST", "/chat/stream"): ("/chat/stream", {"question": "q"}, {"rag:answer", ANONYMOUS}),
    ("POST", "/feedback"): ("/feedback", {"request_id": "req-1", "rating": 1}, {"rag:answer", ANONYMOUS}),
    ("GET", "/corpora"): ("/corpora", None, {"rag:read"}),
    ("GET", "/stats"): ("/stats", None, {"rag:read"}),
    # Who may chat with a corpus may open its citations: the raw file and the source view.
    ("GET", "/files/{corpus:str}/{path:path}"): (
        "/files/docs@1/guide/page1.md", None, {"rag:read", "rag:answer", ANONYMOUS}),
    ("GET", "/source/{corpus:str}/{path:path}"): (
        "/source/docs@1/guide/page1.md?lines=1-2", None, {"rag:read", "rag:answer", ANONYMOUS}),
    ("POST", "/internal/index/build"): (
        "/internal/index/build", {"corpus": "docs@1", "root": "/srv/docs"}, {"rag:index:build"}),
    ("POST", "/internal/index/promote"): (
        "/internal/index/promote", {"corpus": "docs@1", "index_version": "v2"}, {"rag:index:promote"}),
    ("POST", "/internal/index/rollback"): ("/internal/index/rollback", {"corpus": "docs@1"}, {"rag:index:promote"}),
    ("GET", "/internal/index/status"): ("/internal/index/status?corpus=docs@1", None, INDEX_SCOPES),
    # Removing a corpus takes it from every reader: rag:admin only, not the index scopes.
    ("POST", "/internal/index/remove"): ("/internal/index/remove", {"corpus": "docs@1", "dry_run": True}, set()),
}

TOOLS: dict[str, tuple[dict, set[str]]] = {
    "search_articles": ({"query": "q"}, {"rag:search"}),
    "get_article_chunks": ({"chunk_ids": [chunk_id(1)]}, {"rag:read"}),
    "answer_from_articles": ({"question": "q"}, {"rag:answer", ANONYMOUS}),
    "list_corpora": ({}, {"rag:read"}),
    "knowledge_base_stats": ({}, {"rag:read"}),
}


def allowed(column: str, scopes: set[str]) -> bool:
    return column in scopes or column == Scope.ADMIN.value


@pytest.fixture
async def column_tokens(pg_url: str, schema: str) -> AsyncIterator[dict[str, str]]:
    pool = await create_pool(pg_url, schema=schema)
    store = TokenStore(pool)
    made = {s.value: (await store.create(f"only-{s.name.lower()}", [s]))[1] for s in Scope}
    made[NO_SCOPE] = (await store.create("no-scopes", []))[1]
    await pool.close()
    yield made


def headers_for(column: str, tokens: dict[str, str]) -> dict[str, str]:
    return {} if column == ANONYMOUS else bearer(tokens[column])


def test_the_table_names_every_route(mesh: Mesh, pg_url: str, schema: str) -> None:
    app = token_app(mesh, pg_url, schema)
    served = {
        (method, route.path.removeprefix(API))
        for route in app.routes
        if route.path.startswith(API + "/")
        for method in getattr(route, "methods", ())
        if method not in ("HEAD", "OPTIONS")
    }
    assert served == set(ROUTES)


async def test_every_route_against_every_scope(
    mesh: Mesh, pg_url: str, schema: str, column_tokens: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "page1.md").write_text("page one\n", encoding="utf-8")
    app = token_app(mesh, pg_url, schema, corpus_roots={"docs@1": str(tmp_path)})
    outcomes: dict[tuple[str, str, str], int] = {}
    async with serve(app) as base_url, httpx.AsyncClient(base_url=base_url + API, timeout=30) as http:
        for (method, template), (path, body, scopes) in ROUTES.items():
            for column in COLUMNS:
                response = await http.request(method, path, json=body, headers=headers_for(column, column_tokens))
                outcomes[(method, template, column)] = response.status_code
                if response.status_code >= 400:
                    assert response.json()["code"] in ("PERMISSION_DENIED", "UNAUTHENTICATED"), response.text

    wrong = {}
    for (method, template), (_, _, scopes) in ROUTES.items():
        for column in COLUMNS:
            ok = 201 if template == "/feedback" else 200
            expected = ok if allowed(column, scopes) else (401 if column == ANONYMOUS else 403)
            if outcomes[(method, template, column)] != expected:
                wrong[(method, template, column)] = (outcomes[(method, template, column)], expected)
    assert not wrong, wrong


async def test_every_mcp_tool_against_every_scope(
    mesh: Mesh, pg_url: str, schema: str, column_tokens: dict[str, str]
) -> None:
    outcomes: dict[tuple[str, str], str] = {}
    async with serve(token_app(mesh, pg_url, schema)) as base_url:
        for column in COLUMNS:
            async with httpx2.AsyncClient(headers=headers_for(column, column_tokens), timeout=30) as http:
                async with Client(streamable_http_client(f"{base_url}/mcp", http_client=http)) as client:
                    for tool, (arguments, _) in TOOLS.items():
                        result = await client.call_tool(tool, arguments)
                        outcomes[(tool, column)] = (
                            result.content[0].text.split(":", 1)[0] if result.is_error else "ok"
                        )

    wrong = {}
    for tool, (_, scopes) in TOOLS.items():
        for column in COLUMNS:
            expected = "ok" if allowed(column, scopes) else (
                "UNAUTHENTICATED" if column == ANONYMOUS else "PERMISSION_DENIED")
            if outcomes[(tool, column)] != expected:
                wrong[(tool, column)] = (outcomes[(tool, column)], expected)
    assert not wrong, wrong
