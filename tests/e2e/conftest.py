"""The embedded mesh as real processes, shared by the end-to-end tests of one session."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from ragmesh_cli.mesh import Mesh, MeshPorts

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fixtures" / "e2e_corpus"


def _database_url(server_url: str, name: str) -> str:
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def _psql(server_url: str, sql: str) -> None:
    import asyncio

    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(server_url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def _free_port_block(size: int = 20) -> int:
    """The first of `size` consecutive loopback ports that are all free right now."""
    import random
    import socket

    for _ in range(50):
        base = random.randrange(20000, 60000 - size)
        try:
            socks = []
            for port in range(base, base + size):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no block of free ports")


@pytest.fixture(scope="session")
def e2e_database(pg_url: str) -> Iterator[str]:
    """A throwaway database, so the registry of the test mesh never meets a developer's."""
    name = f"ragmesh_e2e_{uuid.uuid4().hex[:10]}"
    _psql(pg_url, f"CREATE DATABASE {name}")
    try:
        yield _database_url(pg_url, name)
    finally:
        _psql(pg_url, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
        _psql(pg_url, f"DROP DATABASE IF EXISTS {name}")


@pytest.fixture(scope="session")
def mesh(tmp_path_factory: pytest.TempPathFactory, e2e_database: str, redis_url: str) -> Iterator[Mesh]:
    state = tmp_path_factory.mktemp("mesh-state")
    trace_file = state / "spans.jsonl"
    # Twenty consecutive ports from a free one; a collision fails the start loudly.
    base = _free_port_block()
    mesh = Mesh(
        state_dir=state,
        ports=MeshPorts(base),
        extra_env={
            "RAGMESH_POSTGRES_URL": e2e_database,
            "RAGMESH_REDIS_URL": redis_url,
            "RAGMESH_TRACE_FILE": str(trace_file),
            "RAGMESH_LOG_LEVEL": "INFO",
        },
    )
    mesh.start(timeout=180, log=lambda m: print(m, file=sys.stderr))
    try:
        env = mesh.env()
        done = subprocess.run(
            [sys.executable, "-m", "ragmesh_cli.main", "index", "ci", "--corpus", str(CORPUS),
             "--library", "quokka", "--version", "1.0"],
            env=env, capture_output=True, text=True, timeout=600,
        )
        assert done.returncode == 0, f"index ci failed:\n{done.stderr}\n{done.stdout}"
        yield mesh
    finally:
        mesh.stop()
