"""PostgreSQL and Redis restart under a running process (issue 12, defects 2 and 3): pooled
connections are dead afterwards. The first request on each used to fail (a Redis restart degraded
rate limits and sessions for as long as the stale connections lived; a registry call raised
ConnectionRefusedError, a 500). Now a dead connection is dropped and the call retried once, and
while the store is down every call fails with UNAVAILABLE.

Private servers from the pip packages the embedded default uses (never the shared 5432/6379).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragmesh_cli.mesh import stores
from ragmesh_common.errors import ErrorCode, RagmeshError


@pytest.fixture
def private_state(private_stores) -> Path:
    yield private_stores.state_dir
    private_stores.ensure()


@pytest.fixture
def private_pg(private_stores) -> str:
    return private_stores.pg_url


@pytest.fixture
def private_redis(private_stores) -> str:
    return private_stores.redis_url


def restart_postgres(state: Path, url: str) -> None:
    assert stores.stop_postgres(state)
    assert stores.ensure_postgres(state) == url  # same port: a restart, not a new server


def restart_redis(state: Path, url: str) -> None:
    assert stores.stop_redis(state)
    assert stores.ensure_redis(state) == url


async def test_a_pool_survives_a_postgres_restart(private_state: Path, private_pg: str) -> None:
    from ragmesh_common.pg import create_pool

    pool = await create_pool(private_pg, schema="restarts", min_size=3, max_size=3)
    try:
        assert await pool.fetchval("SELECT 1") == 1
        restart_postgres(private_state, private_pg)
        # Every pooled connection is dead now; each kind of call still answers on the first try.
        assert await pool.fetchval("SELECT 2") == 2
        assert await pool.fetchrow("SELECT 3 AS n") is not None
        assert await pool.fetch("SELECT 4") is not None
        await pool.execute("SELECT 5")
        async with pool.acquire() as conn, conn.transaction():
            assert await conn.fetchval("SELECT 6") == 6
    finally:
        await pool.close()


async def test_postgres_down_is_unavailable_and_back_is_served(private_state: Path, private_pg: str) -> None:
    from ragmesh_common.pg import create_pool

    pool = await create_pool(private_pg, schema="restarts", max_size=2)
    try:
        assert stores.stop_postgres(private_state)
        for call in (lambda: pool.fetchval("SELECT 1"), lambda: pool.execute("SELECT 1")):
            with pytest.raises(RagmeshError) as err:
                await call()
            assert err.value.code is ErrorCode.UNAVAILABLE
        with pytest.raises(RagmeshError) as err:
            async with pool.acquire():
                pass
        assert err.value.code is ErrorCode.UNAVAILABLE
        stores.ensure_postgres(private_state)
        assert await pool.fetchval("SELECT 7") == 7
    finally:
        stores.ensure_postgres(private_state)
        await pool.close()


async def test_text_postgres_cannot_hold_is_invalid_character(private_pg: str) -> None:
    from ragmesh_common.pg import create_pool

    pool = await create_pool(private_pg, schema="restarts", max_size=1)
    try:
        with pytest.raises(RagmeshError) as err:
            await pool.fetchval("SELECT $1::text", "nul\x00inside")
        assert err.value.code is ErrorCode.INVALID_CHARACTER
    finally:
        await pool.close()


async def test_the_indexer_status_with_postgres_down_is_unavailable(private_state: Path, private_pg: str) -> None:
    """GET /internal/index/status answered 500 INTERNAL: Status let ConnectionRefusedError out."""
    from ragmesh.v1 import indexer_pb2
    from ragmesh_indexer.build import BuildOptions, IndexBuilder
    from ragmesh_indexer.domain import ChunkingConfig
    from ragmesh_indexer.registry.postgres import PostgresIndexRegistry
    from ragmesh_indexer.servicer import IndexerServicer

    registry = await PostgresIndexRegistry.open(private_pg, schema="indexer_restarts")
    builder = IndexBuilder(registry, None, None, BuildOptions(ChunkingConfig(), 1024, ""))  # type: ignore[arg-type]
    servicer = IndexerServicer(registry, builder, None, None, None)  # type: ignore[arg-type]
    try:
        assert stores.stop_postgres(private_state)
        with pytest.raises(RagmeshError) as err:
            await servicer.Status(indexer_pb2.StatusRequest(corpus="docs@1"), None)
        assert err.value.code is ErrorCode.UNAVAILABLE
        with pytest.raises(RagmeshError) as err:  # a transaction (promote, rollback, ...)
            await registry.rollback("docs@1", actor="t", reason="t")
        assert err.value.code is ErrorCode.UNAVAILABLE
        stores.ensure_postgres(private_state)
        with pytest.raises(RagmeshError) as err:  # back: an ordinary answer (no such corpus)
            await servicer.Status(indexer_pb2.StatusRequest(corpus="docs@1"), None)
        assert err.value.code is ErrorCode.NOT_FOUND
    finally:
        stores.ensure_postgres(private_state)
        await registry.close()


async def test_gateway_redis_clients_survive_a_redis_restart(private_state: Path, private_redis: str) -> None:
    """Sessions and rate limits through the gateway's own composition root (build_deps)."""
    from ragmesh_gateway.access.ports import RequestInfo, RouteClass
    from ragmesh_gateway.sessions.ports import Turn
    from ragmesh_gateway.composition import build_deps
    from ragmesh_gateway.settings import GatewaySettings

    deps = build_deps(GatewaySettings(redis_url=private_redis, rate_limits="*=100/100",
                                      session_prefix="restarts:s", rate_limit_prefix="restarts:rl"))
    try:
        info = RequestInfo(headers={}, client_host="127.0.0.1")
        session = await deps.session_memory.create("owner")
        await deps.session_memory.remember(session, "owner", [Turn("user", "question?")])
        assert (await deps.rate_limiter.admit(info, RouteClass.SEARCH)).headers
        restart_redis(private_state, private_redis)
        # The stale connection is dropped and the call retried: served, not degraded, and the
        # session is still there (the embedded Redis keeps an append-only file).
        decision = await deps.rate_limiter.admit(info, RouteClass.SEARCH)
        assert decision.allowed and "RateLimit-Remaining" in decision.headers
        await deps.session_memory.remember(session, "owner", [Turn("assistant", "answer.")])
        assert [t.content for t in await deps.session_memory.history(session, "owner")] == ["question?", "answer."]
    finally:
        await deps.close()


async def test_the_embedded_redis_keeps_sessions_across_a_crash(private_state: Path, private_redis: str) -> None:
    """Sessions were lost when the embedded Redis restarted: it kept nothing on disk between
    5-minute snapshots. It now keeps an append-only file (fsync every second) in the state folder."""
    import asyncio
    import os
    import signal

    from ragmesh_common.redis_client import connect

    client = connect(private_redis)
    try:
        await client.set("restarts:kept", "yes")
        await asyncio.sleep(1.5)  # appendfsync everysec: at most the last second is at risk
        pid = int((private_state / "redis" / "redis.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)  # a crash: no shutdown snapshot
        while stores._alive(pid, "redis-server"):
            await asyncio.sleep(0.05)
        assert stores.ensure_redis(private_state) == private_redis
        assert await client.get("restarts:kept") == b"yes"
    finally:
        await client.aclose()
    assert list((private_state / "redis").rglob("*.aof*")), "the append-only file lives in the state folder"
