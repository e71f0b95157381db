"""PostgreSQL access shared by the services: one pool per service schema, and plain-SQL migrations.

Each service owns one schema (``gateway``, ``indexer``) in a shared database and never reads another
service's tables. A pool's connections have ``search_path`` set to that schema, so SQL in the service
names tables unqualified. ``json``/``jsonb`` columns come back as Python objects and accept them.

Migrations are files ``NNNN_name.sql`` in a folder beside the code that uses them. They are applied in
number order, once each, and recorded in ``<schema>.schema_migrations``. All pending files apply in one
transaction that first takes a transaction-scoped advisory lock keyed on the schema: two processes that
start at once serialise there, and the second finds nothing left to do.

Pools survive a PostgreSQL restart (:class:`ResilientPool`): a statement that finds its pooled
connection dead is retried once on a fresh one, and a connection handed out for a transaction is
checked first; every other driver failure becomes ``UNAVAILABLE`` (the server is down) or
``INVALID_CHARACTER`` (text the server cannot hold), never an unhandled exception.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import asyncpg

from ragmesh_common.errors import ErrorCode, RagmeshError

log = logging.getLogger("ragmesh.pg")
T = TypeVar("T")

# A dead or unreachable server: the statement never ran, or its connection is gone.
# (InternalClientError: a pooled connection whose socket the server closed while it sat idle.)
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    OSError, TimeoutError, asyncpg.PostgresConnectionError, asyncpg.InterfaceError,
    asyncpg.OperatorInterventionError, asyncpg.InsufficientResourcesError, asyncpg.InternalClientError,
)
# Text PostgreSQL cannot hold (NUL in text, a character the encoding lacks).
TEXT_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.CharacterNotInRepertoireError, asyncpg.UntranslatableCharacterError,
)


def database_error(exc: BaseException, what: str) -> RagmeshError:
    """The taxonomy's answer for a driver failure; the message names no data and no URL."""
    if isinstance(exc, TEXT_ERRORS):
        return RagmeshError(ErrorCode.INVALID_CHARACTER, f"{what}: text the database cannot hold")
    return RagmeshError(ErrorCode.UNAVAILABLE, f"{what}: database unavailable ({type(exc).__name__})")


@contextlib.asynccontextmanager
async def database_errors(what: str) -> AsyncIterator[None]:
    """Driver and network failures inside the block -> UNAVAILABLE / INVALID_CHARACTER."""
    try:
        yield
    except CONNECTION_ERRORS + TEXT_ERRORS as exc:
        raise database_error(exc, what) from exc


class ResilientPool:
    """An ``asyncpg.Pool`` that survives a server restart and speaks the error taxonomy.

    ``fetch``/``fetchrow``/``fetchval``/``execute`` retry once when the connection they got turns
    out dead. After a restart every idle pooled connection is dead, so the first failure expires
    them all (each is replaced on its next acquire) and the retry runs on a new connection.
    ``acquire`` (for transactions) hands out a connection that just answered a ping, the same way.
    Anything else of asyncpg's Pool is passed through.
    """

    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    def __getattr__(self, name: str) -> Any:
        return getattr(self._pool, name)

    async def _once_more(self, call: Callable[[], Awaitable[T]], what: str) -> T:
        try:
            return await call()
        except CONNECTION_ERRORS as first:
            log.info("retrying once on a fresh connection", extra={"fields": {"error": type(first).__name__}})
            await self._pool.expire_connections()
            try:
                return await call()
            except CONNECTION_ERRORS + TEXT_ERRORS as exc:
                raise database_error(exc, what) from exc
        except TEXT_ERRORS as exc:
            raise database_error(exc, what) from exc

    async def fetch(self, query: str, *args: Any, **kwargs: Any) -> list[asyncpg.Record]:
        return await self._once_more(lambda: self._pool.fetch(query, *args, **kwargs), "query")

    async def fetchrow(self, query: str, *args: Any, **kwargs: Any) -> asyncpg.Record | None:
        return await self._once_more(lambda: self._pool.fetchrow(query, *args, **kwargs), "query")

    async def fetchval(self, query: str, *args: Any, **kwargs: Any) -> Any:
        return await self._once_more(lambda: self._pool.fetchval(query, *args, **kwargs), "query")

    async def execute(self, query: str, *args: Any, **kwargs: Any) -> str:
        return await self._once_more(lambda: self._pool.execute(query, *args, **kwargs), "statement")

    async def _live_connection(self) -> asyncpg.Connection:
        for attempt in (1, 2):
            try:
                conn = await self._pool.acquire()
            except CONNECTION_ERRORS as exc:
                raise database_error(exc, "connect") from exc
            try:
                await conn.execute("SELECT 1")
                return conn
            except CONNECTION_ERRORS as exc:
                conn.terminate()
                await self._pool.release(conn)
                await self._pool.expire_connections()
                if attempt == 2:
                    raise database_error(exc, "connect") from exc
        raise AssertionError("unreachable")

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        conn = await self._live_connection()
        try:
            async with database_errors("transaction"):
                yield conn
        finally:
            await self._pool.release(conn)

    async def close(self) -> None:
        await self._pool.close()

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


async def create_pool(url: str, *, schema: str, min_size: int = 1, max_size: int = 5) -> ResilientPool:
    """A pool whose connections use ``schema`` (created if needed) as their search_path."""
    check_schema_name(schema)
    try:
        conn = await asyncpg.connect(url)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        # The URL may hold a password, so only the kind of failure goes into the message.
        reason = type(exc).__name__
        raise RagmeshError(ErrorCode.UNAVAILABLE, f"cannot connect to PostgreSQL: {reason}") from exc
    try:
        async with database_errors("create schema"):
            await ensure_schema(conn, schema)
    finally:
        await conn.close()
    async with database_errors("open pool"):
        pool = await asyncpg.create_pool(
            url,
            min_size=min_size,
            max_size=max_size,
            server_settings={"search_path": schema, "application_name": f"ragmesh-{schema}"},
            init=_init_connection,
        )
    assert pool is not None  # create_pool only returns None when awaited lazily
    return ResilientPool(pool)


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
