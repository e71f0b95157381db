"""Token auth, corpus grants and rate limits wired into the gateway: real PostgreSQL, Redis and gRPC."""

from __future__ import annotations

import httpx
from litestar.testing import AsyncTestClient
from mcp import Client

from gateway_mesh import Mesh
from loopback_server import serve
from gateway_tokens import bearer, schema, token_app, tokens, with_internal_corpus  # noqa: F401 - fixtures

SEARCH = "/api/rag/v1/search"


async def test_readable_corpora_follow_tokens_and_grants(mesh: Mesh, pg_url, schema, tokens) -> None:
    with_internal_corpus(mesh)
    async with AsyncTestClient(token_app(mesh, pg_url, schema)) as client:
        # Anonymous site traffic may chat, over public corpora only; anything else asks for a token.
        anonymous = await client.post("/api/rag/v1/chat", json={"question": "q"})
        assert anonymous.status_code == 200
        assert list(mesh.retrieval.searches[-1].readable_corpora) == ["docs@1"]
        refused = await client.post(SEARCH, json={"query": "q"})
        assert refused.status_code == 401 and refused.json()["code"] == "UNAUTHENTICATED"
        assert refused.headers["www-authenticate"] == 'Bearer realm="ragmesh"'

        await client.post(SEARCH, json={"query": "q"}, headers=bearer(tokens["reader"]))
        assert list(mesh.retrieval.searches[-1].readable_corpora) == ["docs@1"]

        await client.post(SEARCH, json={"query": "q"}, headers=bearer(tokens["granted"]))
        assert list(mesh.retrieval.searches[-1].readable_corpora) == ["docs@1", "internal@1"]

        corpora = await client.get("/api/rag/v1/corpora", headers=bearer(tokens["reader"]))
        assert [c["corpus"] for c in corpora.json()["corpora"]] == ["docs@1"]
        corpora = await client.get("/api/rag/v1/corpora", headers=bearer(tokens["admin"]))
        assert [c["corpus"] for c in corpora.json()["corpora"]] == ["docs@1", "internal@1"]


async def test_bad_tokens_and_missing_scopes_are_refused(mesh: Mesh, pg_url, schema, tokens) -> None:
    async with AsyncTestClient(token_app(mesh, pg_url, schema, allow_anonymous=False)) as client:
        for headers in ({}, bearer("rmk_0123456789abcdef_" + "x" * 43), {"Authorization": "Basic abc"}):
            response = await client.post(SEARCH, json={"query": "q"}, headers=headers)
            assert response.status_code == 401 and response.json()["code"] == "UNAUTHENTICATED"
            challenge = response.headers["www-authenticate"]
            assert challenge.startswith('Bearer realm="ragmesh"')
            assert ('error="invalid_token"' in challenge) == bool(headers)
        # Authentication comes before the body: a stranger learns nothing from validation errors.
        garbage = await client.post(SEARCH, content=b"{not json", headers={"content-type": "application/json"})
        assert garbage.status_code == 401
        chat = await client.post("/api/rag/v1/chat", json={"question": "q"}, headers=bearer(tokens["reader"]))
        assert chat.status_code == 403 and chat.json()["code"] == "PERMISSION_DENIED"
        promote = await client.post(
            "/api/rag/v1/internal/index/promote",
            json={"corpus": "docs@1", "index_version": "v2"},
            headers=bearer(tokens["reader"]),
        )
        assert promote.status_code == 403
        assert mesh.indexer.requests == [] and mesh.generation.requests == []
        ok = await client.post(
            "/api/rag/v1/internal/index/promote",
            json={"corpus": "docs@1", "index_version": "v2"},
            headers=bearer(tokens["admin"]),
        )
        assert ok.status_code == 200 and mesh.indexer.requests[-1].actor == "ops"


async def test_mcp_tools_check_the_same_tokens(mesh: Mesh, pg_url, schema, tokens) -> None:
    import httpx2

    async with serve(token_app(mesh, pg_url, schema, allow_anonymous=False)) as base_url:
        async with httpx2.AsyncClient(headers=bearer(tokens["reader"])) as http:
            from mcp.client.streamable_http import streamable_http_client

            async with Client(streamable_http_client(f"{base_url}/mcp", http_client=http)) as client:
                allowed = await client.call_tool("search_articles", {"query": "q"})
                refused = await client.call_tool("answer_from_articles", {"question": "q"})
        async with httpx.AsyncClient() as http:
            # Without a token (anonymous off) or with a bad one, /mcp is refused at the HTTP level.
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
            mcp_headers = {"accept": "application/json, text/event-stream"}
            missing = await http.post(f"{base_url}/mcp", json=initialize, headers=mcp_headers)
            bad = await http.post(
                f"{base_url}/mcp", json=initialize, headers={**mcp_headers, **bearer("rmk_bad")}
            )
    assert not allowed.is_error
    assert refused.is_error and refused.content[0].text.startswith("PERMISSION_DENIED:")
    assert missing.status_code == bad.status_code == 401
    assert missing.json()["code"] == bad.json()["code"] == "UNAUTHENTICATED"
    assert missing.headers["www-authenticate"] == 'Bearer realm="ragmesh"'
    assert bad.headers["www-authenticate"] == (
        'Bearer realm="ragmesh", error="invalid_token", error_description="missing, malformed, unknown or revoked token"')


async def test_rate_limit_answers_429_with_retry_after(mesh: Mesh, pg_url, schema, tokens, redis_url) -> None:
    app = token_app(mesh, pg_url, schema, rate_limits="search=0.01/2", redis_url=redis_url)
    async with AsyncTestClient(app) as client:
        statuses = [
            (await client.post(SEARCH, json={"query": "q"}, headers=bearer(tokens["reader"]))).status_code
            for _ in range(3)
        ]
        limited = await client.post(SEARCH, json={"query": "q"}, headers=bearer(tokens["reader"]))
        other_token = await client.post(SEARCH, json={"query": "q"}, headers=bearer(tokens["granted"]))
        unlimited_class = await client.get("/api/rag/v1/corpora", headers=bearer(tokens["reader"]))
    assert statuses == [200, 200, 429]
    assert limited.status_code == 429 and limited.json()["code"] == "RATE_LIMITED"
    assert int(limited.headers["retry-after"]) >= 1
    assert limited.headers["ratelimit-limit"] == "2" and limited.headers["ratelimit-remaining"] == "0"
    assert limited.headers["ratelimit-policy"] == "2;w=200"
    assert other_token.status_code == 200 and other_token.headers["ratelimit-remaining"] == "1"
    assert unlimited_class.status_code == 200 and "ratelimit-limit" not in unlimited_class.headers


async def test_rate_limit_runs_before_authentication(mesh: Mesh, pg_url, schema, tokens, redis_url) -> None:
    app = token_app(
        mesh, pg_url, schema, allow_anonymous=False, rate_limits="search=0.01/2,mcp=0.01/1", redis_url=redis_url
    )
    guessed = bearer("rmk_0123456789abcdef_" + "g" * 43)
    async with serve(app) as base_url, httpx.AsyncClient(base_url=base_url) as http:
        statuses = [(await http.post(SEARCH, json={"query": "q"}, headers=guessed)).status_code for _ in range(3)]
        bad_body = await http.post(SEARCH, content=b"{not json", headers={**guessed, "content-type": "application/json"})
        mcp = [
            (await http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=guessed))
            for _ in range(2)
        ]
    # Guessing tokens spends a budget like any other request: the token store is not asked again.
    assert statuses == [401, 401, 429]
    assert bad_body.status_code == 429  # limited before the body is even read
    assert [r.status_code for r in mcp] == [401, 429]
    assert mcp[1].json()["code"] == "RATE_LIMITED" and int(mcp[1].headers["retry-after"]) >= 1
    assert mcp[1].headers["ratelimit-limit"] == "1"


async def test_anonymous_traffic_has_its_own_budget(mesh: Mesh, pg_url, schema, tokens, redis_url) -> None:
    limits = "anonymous=0.01/1,anonymous.feedback=0.01/2,chat=0.01/5"
    app = token_app(mesh, pg_url, schema, rate_limits=limits, redis_url=redis_url)
    rating = {"request_id": "req-1", "rating": 1}
    async with AsyncTestClient(app) as client:
        anonymous = [(await client.post("/api/rag/v1/chat", json={"question": "q"})).status_code for _ in range(2)]
        ratings = [(await client.post("/api/rag/v1/feedback", json=rating)).status_code for _ in range(3)]
        with_token = await client.post(
            "/api/rag/v1/chat", json={"question": "q"}, headers=bearer(tokens["granted"])
        )
    # Site traffic: one "anonymous" budget per address, with a separate one for ratings.
    assert anonymous == [200, 429]
    assert ratings == [201, 201, 429]
    # Token holders spend the route class's budget, per token.
    assert with_token.status_code == 200 and with_token.headers["ratelimit-limit"] == "5"
