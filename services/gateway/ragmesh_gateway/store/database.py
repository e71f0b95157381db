"""The gateway's PostgreSQL schema: where its migrations live and how driver failures surface.

Stores take a pool from ``ragmesh_common.pg.create_pool(url, schema=GATEWAY_SCHEMA)``; the
composition root runs :func:`migrate` once at start-up (concurrent replicas serialise on an
advisory lock inside ``apply_migrations``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg

from ragmesh_common.pg import apply_migrations
from ragmesh_common.pg import database_errors as _database_errors

GATEWAY_SCHEMA = "gateway"
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"


async def migrate(pool: asyncpg.Pool, *, schema: str = GATEWAY_SCHEMA) -> list[str]:
    """Apply pending gateway migrations; returns the names applied now."""
    return await apply_migrations(pool, schema=schema, migrations_dir=MIGRATIONS_DIR)


@contextlib.asynccontextmanager
async def database_errors(what: str) -> AsyncIterator[None]:
    """Turn driver and network failures into UNAVAILABLE with a message that names no data.

    A database that cannot be reached is UNAVAILABLE, never UNAUTHENTICATED: a caller with a valid
    token must not be told it is invalid because PostgreSQL is down.
    """
    async with _database_errors(what):
        yield
