"""A gateway with token auth from its real composition root: settings -> build_deps -> create_app.

Each test gets its own PostgreSQL schema (``RAGMESH_GATEWAY_DB_SCHEMA``) and its own Redis key prefix.
Import the fixtures into a test module to use them (``from gateway_tokens import schema, tokens``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from litestar import Litestar

from ragmesh.v1 import common_pb2, retrieval_pb2
from ragmesh_common.pg import create_pool

from gateway_mesh import Mesh, make_chunk
from ragmesh_gateway.access.corpus_access import AccessStore
from ragmesh_gateway.access.token_store import TokenStore
from ragmesh_gateway.app import create_app
from ragmesh_gateway.settings import GatewaySettings
from ragmesh_gateway.store.database import migrate

INTERNAL = "internal@1"
INTERNAL_TEXT = "internal-only-capybara-4471"


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
        "asker": (await store.create("asker-client", ["rag:search", "rag:read", "rag:answer"]))[1],
        "granted": (await store.create("granted-client", ["rag:search", "rag:read", "rag:answer"]))[1],
        "admin": (await store.create("ops", ["rag:admin"]))[1],
    }
    await grants.grant("granted-client", INTERNAL)
    await pool.close()
    yield made


def internal_chunk(n: int) -> common_pb2.Chunk:
    chunk = make_chunk(n, corpus=INTERNAL)
    chunk.quote = f"{INTERNAL_TEXT} {n}"
    chunk.index_version = "v3"
    return chunk


def with_internal_corpus(mesh: Mesh, *, chunks: int = 0) -> None:
    """An internal corpus (readable only through a grant), optionally with chunks of its own."""
    mesh.retrieval.corpora = [
        *mesh.retrieval.corpora,
        retrieval_pb2.CorpusInfo(
            corpus=INTERNAL,
            library="internal",
            version="1",
            visibility="internal",
            active_index_version="v3",
            points=chunks,
            documents=chunks,
            state="active",
        ),
    ]
    mesh.retrieval.chunks.extend(internal_chunk(100 + n) for n in range(chunks))


def token_settings(
    mesh: Mesh,
    pg_url: str,
    schema: str,
    *,
    allow_anonymous: bool = True,
    rate_limits: str = "",
    redis_url: str = "",
    **overrides,
) -> GatewaySettings:
    return mesh.settings(
        corpora=["docs@1", INTERNAL],
        auth_mode="tokens",
        allow_anonymous=allow_anonymous,
        postgres_url=pg_url,
        db_schema=schema,
        rate_limits=rate_limits,
        redis_url=redis_url,
        rate_limit_prefix=f"ragmesh:test:{uuid.uuid4().hex[:12]}",
        **overrides,
    )


def token_app(mesh: Mesh, pg_url: str, schema: str, **options) -> Litestar:
    return create_app(token_settings(mesh, pg_url, schema, **options))


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
