"""Token auth, corpus grants and rate limits wired into the gateway: real PostgreSQL, Redis and gRPC."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from litestar.testing import AsyncTestClient
from mcp import Client
from redis.asyncio import Redis

from ragmesh.v1 import retrieval_pb2
from ragmesh_common.pg import create_pool

from gateway_mesh import Mesh, serve
from ragmesh_gateway.access_adapters import RedisRateLimit, SecurityStores, TokenAuthenticator
from ragmesh_gateway.app import create_app
from ragmesh_gateway.deps import build_deps
from ragmesh_gateway.security.corpus_access import AccessStore
from ragmesh_gateway.security.database import migrate
from ragmesh_gateway.security.ratelimit import RateLimiter as RedisBuckets
from ragmesh_gateway.security.ratelimit import parse_limits
from ragmesh_gateway.security.token_store import TokenStore

SEARCH = "/api/rag/v1/search"


@pytest.fixture
async def schema(pg_url: str, unique_schema) -> AsyncIterator[str]:
    name = unique_schema("gw")
    pool = await create_pool(pg_url, schema=name)
    await migrate(pool, schema=name)
    await pool.close()
    yield name


@pytest.fixture
async def tokens(pg_url: str, schema: str) -> AsyncIterator[dict[str, str]]:
    pool = await create_pool(pg_url, schema=schema)
    store, grants = TokenStore(pool), AccessStore(pool)
    made = {
        "reader": (await store.create("reader-client", ["rag:search", "rag:read"]))[1],
        "granted": (await store.create("granted-client", ["rag:search", "rag:read", "rag:answer"]))[1],
        "admin": (await store.create("ops", ["rag:admin"]))[1],
    }
    await grants.grant("granted-client", "internal@1")
    await pool.close()
    yield made


def with_internal_corpus(mesh: Mesh) -> None:
    mesh.retrieval.corpora = [
        *mesh.retrieval.corpora,
        retrieval_pb2.CorpusInfo(
            corpus="internal@1",
            library="internal",
            version="1",
            visibility="internal",
            active_index_version="v3",
            state="active",
        ),
    ]


def token_app(
    mesh: Mesh,
    pg_url: str,
    schema: str,
    *,
    allow_anonymous: bool = True,
    rate_limits: str = "",
    redis_url: str = "",
):
    settings = mesh.settings(corpora=["docs@1", "internal@1"])
    deps = build_deps(settings)
    stores = SecurityStores(pg_url, schema=schema)
    deps.authenticator = TokenAuthenticator(
        stores, deps.catalog, deps.directory, allow_anonymous=allow_anonymous, trusted_proxies=[]
    )
    deps.on_start.append(stores.start)
    deps.on_close.append(stores.close)
    if rate_limits:
        redis = Redis.from_url(redis_url)
        limits = parse_limits(rate_limits)
        deps.rate_limiter = RedisRateLimit(
            RedisBuckets(redis, limits, key_prefix=f"rm:test:{uuid.uuid4().hex}"), limits
        )
        deps.on_close.append(redis.aclose)
    return create_app(settings, deps)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_readable_corpora_follow_tokens_and_grants(mesh: Mesh, pg_url, schema, tokens) -> None:
    with_internal_corpus(mesh)
    async with AsyncTestClient(token_app(mesh, pg_url, schema)) as client:
        anonymous = await client.post(SEARCH, json={"query": "q"})
        assert anonymous.status_code == 200
        assert list(mesh.retrieval.searches[-1].readable_corpora) == ["docs@1"]

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
        async with Client(f"{base_url}/mcp") as anonymous:
            unauthenticated = await anonymous.call_tool("list_corpora", {})
    assert not allowed.is_error
    assert refused.is_error and refused.content[0].text.startswith("PERMISSION_DENIED:")
    assert unauthenticated.is_error and unauthenticated.content[0].text.startswith("UNAUTHENTICATED:")


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
    assert other_token.status_code == 200 and unlimited_class.status_code == 200
