"""PostgreSQL access shared by the services: one pool per service schema, and plain-SQL migrations.

Each service owns one schema (``gateway``, ``indexer``) in a shared database and never reads another
service's tables. A pool's connections have ``search_path`` set to that schema, so SQL in the service
names tables unqualified. ``json``/``jsonb`` columns come back as Python objects and accept them.

Migrations are files ``NNNN_name.sql`` in a folder beside the code that uses them. They are applied in
number order, once each, and recorded in ``<schema>.schema_migrations``. All pending files apply in one
transaction that first takes a transaction-scoped advisory lock keyed on the schema: two processes that
start at once serialise there, and the second finds nothing left to do.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import asyncpg

from ragmesh_common.errors import ErrorCode, RagmeshError

# Lower-case identifiers only, so a schema name never needs quoting in search_path or DDL.
_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_MIGRATION_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def check_schema_name(schema: str) -> str:
    if not _SCHEMA_NAME.match(schema):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"invalid schema name {schema!r}")
    return schema


def advisory_lock_key(purpose: str) -> int:
    """A stable signed 64-bit key for ``pg_advisory_*lock`` (stable across processes and versions)."""
    digest = hashlib.blake2b(purpose.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def _init_connection(conn: asyncpg.Connection) -> None:
    for type_name in ("json", "jsonb"):
        await conn.set_type_codec(type_name, encoder=json.dumps, decoder=json.loads, schema="pg_catalog")


async def _lock_schema(conn: asyncpg.Connection, schema: str) -> None:
    """Wait for, then hold until the transaction ends, the lock serialising DDL on ``schema``."""
    await conn.execute("SELECT pg_advisory_xact_lock($1)", advisory_lock_key(f"ragmesh.schema.{schema}"))


async def ensure_schema(conn: asyncpg.Connection, schema: str) -> None:
    """Create ``schema`` if missing; safe when several processes race (serialised by a lock)."""
    check_schema_name(schema)
    async with conn.transaction():
        # CREATE SCHEMA IF NOT EXISTS can still fail with a unique violation when two sessions run it
        # at the same moment; the lock makes the second one wait and then see the schema.
        await _lock_schema(conn, schema)
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")


async def create_pool(url: str, *, schema: str, min_size: int = 1, max_size: int = 5) -> asyncpg.Pool:
    """A pool whose connections use ``schema`` (created if needed) as their search_path."""
    check_schema_name(schema)
    try:
        conn = await asyncpg.connect(url)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        # The URL may hold a password, so only the kind of failure goes into the message.
        reason = type(exc).__name__
        raise RagmeshError(ErrorCode.UNAVAILABLE, f"cannot connect to PostgreSQL: {reason}") from exc
    try:
        await ensure_schema(conn, schema)
    finally:
        await conn.close()
    pool = await asyncpg.create_pool(
        url,
        min_size=min_size,
        max_size=max_size,
        server_settings={"search_path": schema, "application_name": f"ragmesh-{schema}"},
        init=_init_connection,
    )
    assert pool is not None  # create_pool only returns None when awaited lazily
    return pool


def discover_migrations(migrations_dir: Path) -> list[tuple[str, Path]]:
    """``(name, path)`` for each ``NNNN_name.sql`` in number order; names are the file stem."""
    found: dict[int, tuple[str, Path]] = {}
    for path in sorted(Path(migrations_dir).iterdir()):
        match = _MIGRATION_FILE.match(path.name)
        if not match or not path.is_file():
            continue
        number = int(match.group(1))
        if number in found:
            raise RagmeshError(
                ErrorCode.INTERNAL, f"two migrations share number {number:04d} in {migrations_dir}"
            )
        found[number] = (path.stem, path)
    return [found[number] for number in sorted(found)]


async def apply_migrations(pool: asyncpg.Pool, *, schema: str, migrations_dir: Path) -> list[str]:
    """Apply pending migrations in ``migrations_dir`` to ``schema``; returns the names applied now.

    A migration already applied whose file has changed since is refused: the database and the code
    would disagree about the schema, and silently skipping the change hides that.
    """
    check_schema_name(schema)
    migrations = discover_migrations(migrations_dir)
    applied_now: list[str] = []
    async with pool.acquire() as conn:
        async with conn.transaction():
            # Same key as ensure_schema: schema creation and migrations of one schema never interleave.
            await _lock_schema(conn, schema)
            await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
            # SET LOCAL ends with the transaction, so the pooled connection keeps its own search_path.
            await conn.execute(f"SET LOCAL search_path TO {schema}")
            await conn.execute(
                f"""CREATE TABLE IF NOT EXISTS {schema}.schema_migrations (
                        name text PRIMARY KEY,
                        checksum text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now())"""
            )
            rows = await conn.fetch(f"SELECT name, checksum FROM {schema}.schema_migrations")
            recorded = {row["name"]: row["checksum"] for row in rows}
            for name, path in migrations:
                sql = path.read_text(encoding="utf-8")
                checksum = hashlib.sha256(sql.encode("utf-8")).hexdigest()
                if name in recorded:
                    if recorded[name] != checksum:
                        raise RagmeshError(
                            ErrorCode.INTERNAL,
                            f"migration {name} in schema {schema} was changed after it was applied",
                        )
                    continue
                await conn.execute(sql)
                await conn.execute(
                    f"INSERT INTO {schema}.schema_migrations (name, checksum) VALUES ($1, $2)", name, checksum
                )
                applied_now.append(name)
    return applied_now


async def applied_migrations(pool: asyncpg.Pool, *, schema: str) -> list[str]:
    """Names recorded in ``<schema>.schema_migrations``, oldest first (empty when none)."""
    check_schema_name(schema)
    async with pool.acquire() as conn:
        exists = await conn.fetchval("SELECT to_regclass($1)", f"{schema}.schema_migrations")
        if exists is None:
            return []
        rows = await conn.fetch(f"SELECT name FROM {schema}.schema_migrations ORDER BY name")
    return [row["name"] for row in rows]
