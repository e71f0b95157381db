"""The index version registry in PostgreSQL (schema ``indexer``), through asyncpg.

Every state change of a corpus's versions runs in one transaction that first locks the corpus row
(``SELECT ... FOR UPDATE``). That lock serialises promotions, rollbacks, validations and
retirements of one corpus across processes, so each reads the states it is about to change after
the previous change committed. The deferred exclusion constraints (one active, one previous per
corpus) are the last line of defence should that discipline ever be broken.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import asyncpg
import msgspec

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.pg import apply_migrations, create_pool
from ragmesh_indexer.registry.model import (
    ALLOWED_TRANSITIONS,
    LIVE_STATES,
    BuildProgress,
    BuildStats,
    Corpus,
    CorpusSpec,
    IndexVersion,
    PromotionResult,
    VersionEvent,
    VersionState,
)
from ragmesh_indexer.registry.port import IndexRegistry

SCHEMA = "indexer"
MIGRATIONS_DIR = Path(__file__).parent / "migrations"

Clock = Callable[[], datetime]

# jsonb travels as text in both directions, so the adapter works whatever codecs the pool has.
_VERSION_COLUMNS = """corpus, index_version, state, content_hash, config_hash, collection, created_at,
    created_by, reason, stats::text AS stats, validation::text AS validation, promoted_at, retired_at"""
_CORPUS_FIELDS = ("library", "version", "root", "include", "exclude", "visibility", "license",
                  "source_url", "url_base", "chunking")
_UPSERT_CORPUS = """
    INSERT INTO corpora (id, library, version, root, include, exclude, visibility, license, source_url,
                         url_base, chunking, created_at, updated_at)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)
    ON CONFLICT (id) DO UPDATE SET library = EXCLUDED.library, version = EXCLUDED.version,
        root = EXCLUDED.root, include = EXCLUDED.include, exclude = EXCLUDED.exclude,
        visibility = EXCLUDED.visibility, license = EXCLUDED.license, source_url = EXCLUDED.source_url,
        url_base = EXCLUDED.url_base, chunking = EXCLUDED.chunking, updated_at = EXCLUDED.updated_at,
        removed_at = NULL
    RETURNING *"""


def utc_now() -> datetime:
    return datetime.now(UTC)


def _not_found(what: str) -> RagmeshError:
    return RagmeshError(ErrorCode.NOT_FOUND, what)


def _conflict(message: str, **details: Any) -> RagmeshError:
    return RagmeshError(ErrorCode.CONFLICT, message, details or None)


def _version(row: asyncpg.Record) -> IndexVersion:
    return IndexVersion(
        corpus=row["corpus"],
        index_version=row["index_version"],
        state=VersionState(row["state"]),
        content_hash=row["content_hash"],
        config_hash=row["config_hash"],
        collection=row["collection"],
        created_at=row["created_at"],
        created_by=row["created_by"],
        reason=row["reason"],
        stats=msgspec.convert(json.loads(row["stats"]), BuildStats),
        validation=json.loads(row["validation"]) if row["validation"] is not None else None,
        promoted_at=row["promoted_at"],
        retired_at=row["retired_at"],
    )


def _corpus(row: asyncpg.Record) -> Corpus:
    return Corpus(**{key: (list(row[key]) if key in ("include", "exclude") else row[key])
                     for key in ("id", *_CORPUS_FIELDS, "created_at", "updated_at")})


class PostgresIndexRegistry(IndexRegistry):
    """``pool`` connections must use the registry's schema as search_path (``open`` does that)."""

    def __init__(self, pool: asyncpg.Pool, *, clock: Clock = utc_now) -> None:
        self._pool = pool
        self._clock = clock

    @classmethod
    async def open(cls, url: str, *, schema: str = SCHEMA, clock: Clock = utc_now,
                   max_size: int = 5) -> PostgresIndexRegistry:
        """Pool on ``schema`` with the registry's migrations applied; ``close`` releases it."""
        pool = await create_pool(url, schema=schema, max_size=max_size)
        try:
            await apply_migrations(pool, schema=schema, migrations_dir=MIGRATIONS_DIR)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, clock=clock)

    async def close(self) -> None:
        await self._pool.close()

    # --- corpora ---------------------------------------------------------------------------------
    async def upsert_corpus(self, spec: CorpusSpec) -> Corpus:
        if not spec.id:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "corpus id is empty")
        row = await self._pool.fetchrow(
            _UPSERT_CORPUS, spec.id, *(getattr(spec, key) for key in _CORPUS_FIELDS), self._clock()
        )
        return _corpus(row)

    async def get_corpus(self, corpus: str) -> Corpus:
        row = await self._pool.fetchrow("SELECT * FROM corpora WHERE id = $1 AND removed_at IS NULL", corpus)
        if row is None:
            raise _not_found(f"unknown corpus {corpus!r}")
        return _corpus(row)

    async def list_corpora(self) -> list[Corpus]:
        rows = await self._pool.fetch("SELECT * FROM corpora WHERE removed_at IS NULL ORDER BY id")
        return [_corpus(row) for row in rows]

    async def remove_corpus(self, corpus: str, *, actor: str, reason: str) -> list[IndexVersion]:
        now = self._clock()
        async with self._pool.acquire() as conn, conn.transaction():
            await self._lock_corpus(conn, corpus)
            rows = await conn.fetch(
                f"SELECT {_VERSION_COLUMNS} FROM index_versions WHERE corpus = $1 ORDER BY seq DESC", corpus
            )
            versions = [_version(row) for row in rows]
            for version in versions:
                if version.state is VersionState.RETIRED:
                    continue
                # Not through _check: removal retires a version whatever its state, active included.
                await conn.execute(
                    """UPDATE index_versions SET state = 'retired', retired_at = $3, updated_at = $3
                       WHERE corpus = $1 AND index_version = $2""",
                    corpus, version.index_version, now,
                )
                await self._record(conn, corpus, version.index_version, version.state, VersionState.RETIRED,
                                   actor, reason or "corpus removed", now)
            await conn.execute("DELETE FROM build_progress WHERE corpus = $1", corpus)
            await conn.execute("UPDATE corpora SET removed_at = $2, updated_at = $2 WHERE id = $1", corpus, now)
        return versions

    async def removed_corpora(self) -> list[str]:
        rows = await self._pool.fetch("SELECT id FROM corpora WHERE removed_at IS NOT NULL ORDER BY id")
        return [row["id"] for row in rows]

    # --- builds ----------------------------------------------------------------------------------
    async def find_by_hashes(self, corpus: str, content_hash: str, config_hash: str) -> IndexVersion | None:
        row = await self._pool.fetchrow(
            f"""SELECT {_VERSION_COLUMNS} FROM index_versions
                WHERE corpus = $1 AND content_hash = $2 AND config_hash = $3 AND state = ANY($4::text[])
                ORDER BY seq DESC LIMIT 1""",
            corpus, content_hash, config_hash, [state.value for state in LIVE_STATES],
        )
        return _version(row) if row is not None else None

    async def create_candidate(
        self,
        corpus: str,
        index_version: str,
        *,
        content_hash: str,
        config_hash: str,
        collection: str,
        actor: str,
        reason: str = "",
        stats: BuildStats | None = None,
    ) -> IndexVersion:
        now = self._clock()
        async with self._pool.acquire() as conn, conn.transaction():
            await self._lock_corpus(conn, corpus)
            try:
                row = await conn.fetchrow(
                    f"""INSERT INTO index_versions (corpus, index_version, state, content_hash, config_hash,
                            collection, created_at, created_by, reason, stats, updated_at)
                        VALUES ($1, $2, 'candidate', $3, $4, $5, $6, $7, $8, $9::text::jsonb, $6)
                        RETURNING {_VERSION_COLUMNS}""",
                    corpus, index_version, content_hash, config_hash, collection, now, actor, reason,
                    msgspec.json.encode(stats or BuildStats()).decode(),
                )
            except asyncpg.UniqueViolationError:
                raise _conflict(
                    f"index version {index_version!r} or collection {collection!r} already exists",
                    corpus=corpus, index_version=index_version,
                ) from None
            await self._record(conn, corpus, index_version, None, VersionState.CANDIDATE, actor, reason, now)
        return _version(row)

    async def set_stats(self, corpus: str, index_version: str, stats: BuildStats) -> IndexVersion:
        row = await self._pool.fetchrow(
            f"""UPDATE index_versions SET stats = $3::text::jsonb, updated_at = $4
                WHERE corpus = $1 AND index_version = $2 RETURNING {_VERSION_COLUMNS}""",
            corpus, index_version, msgspec.json.encode(stats).decode(), self._clock(),
        )
        if row is None:
            raise _not_found(f"unknown index version {index_version!r} of corpus {corpus!r}")
        return _version(row)

    async def set_progress(self, corpus: str, index_version: str, stage: str, done: int, total: int) -> None:
        if done < 0 or total < 0:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "progress counts must not be negative")
        try:
            await self._pool.execute(
                """INSERT INTO build_progress (corpus, index_version, stage, done, total, updated_at)
                   VALUES ($1, $2, $3, $4, $5, $6)
                   ON CONFLICT (corpus, index_version) DO UPDATE SET stage = EXCLUDED.stage,
                       done = EXCLUDED.done, total = EXCLUDED.total, updated_at = EXCLUDED.updated_at""",
                corpus, index_version, stage, done, total, self._clock(),
            )
        except asyncpg.ForeignKeyViolationError:
            raise _not_found(f"unknown index version {index_version!r} of corpus {corpus!r}") from None

    async def get_progress(self, corpus: str) -> list[BuildProgress]:
        rows = await self._pool.fetch(
            """SELECT p.corpus, p.index_version, p.stage, p.done, p.total, p.updated_at
               FROM build_progress p JOIN index_versions v USING (corpus, index_version)
               WHERE p.corpus = $1 AND v.state = 'candidate' ORDER BY v.seq DESC""",
            corpus,
        )
        return [BuildProgress(**dict(row)) for row in rows]

    # --- validation ------------------------------------------------------------------------------
    async def mark_validated(
        self, corpus: str, index_version: str, report: dict[str, Any], *, actor: str = "indexer"
    ) -> IndexVersion:
        return await self._move(corpus, index_version, VersionState.VALIDATED, actor, "validation passed",
                                validation=report)

    async def mark_failed(
        self,
        corpus: str,
        index_version: str,
        report: dict[str, Any],
        *,
        actor: str = "indexer",
        reason: str = "",
    ) -> IndexVersion:
        return await self._move(corpus, index_version, VersionState.FAILED, actor, reason or "failed",
                                validation=report)

    async def mark_retired(self, corpus: str, index_version: str, *, actor: str, reason: str) -> IndexVersion:
        return await self._move(corpus, index_version, VersionState.RETIRED, actor, reason)

    async def _move(self, corpus: str, index_version: str, to_state: VersionState, actor: str, reason: str,
                    *, validation: dict[str, Any] | None = None) -> IndexVersion:
        now = self._clock()
        async with self._pool.acquire() as conn, conn.transaction():
            await self._lock_corpus(conn, corpus)
            current = await self._fetch_version(conn, corpus, index_version)
            self._check(current, to_state)
            row = await conn.fetchrow(
                f"""UPDATE index_versions SET state = $3, updated_at = $4,
                        validation = COALESCE($5::text::jsonb, validation),
                        retired_at = CASE WHEN $3 = 'retired' THEN $4 ELSE retired_at END
                    WHERE corpus = $1 AND index_version = $2 RETURNING {_VERSION_COLUMNS}""",
                corpus, index_version, to_state.value, now,
                json.dumps(validation) if validation is not None else None,
            )
            await self._record(conn, corpus, index_version, current.state, to_state, actor, reason, now)
        return _version(row)

    # --- serving ---------------------------------------------------------------------------------
    async def promote(self, corpus: str, index_version: str, *, actor: str, reason: str) -> PromotionResult:
        now = self._clock()
        async with self._pool.acquire() as conn, conn.transaction():
            await self._lock_corpus(conn, corpus)
            target = await self._fetch_version(conn, corpus, index_version)
            active, previous = await self._serving(conn, corpus)
            if target.state is VersionState.ACTIVE:
                return PromotionResult(corpus=corpus, active=target.index_version,
                                       previous=previous.index_version if previous else None, changed=False)
            if target.state is VersionState.PREVIOUS:
                return await self._swap(conn, corpus, active, target, actor, reason, now)
            self._check(target, VersionState.ACTIVE)
            if previous is not None:
                await self._set_state(conn, previous, VersionState.VALIDATED, actor, reason, now)
            if active is not None:
                await self._set_state(conn, active, VersionState.PREVIOUS, actor, reason, now)
            await self._set_state(conn, target, VersionState.ACTIVE, actor, reason, now)
        return PromotionResult(corpus=corpus, active=target.index_version,
                               previous=active.index_version if active else None, changed=True)

    async def rollback(self, corpus: str, *, actor: str, reason: str) -> PromotionResult:
        now = self._clock()
        async with self._pool.acquire() as conn, conn.transaction():
            await self._lock_corpus(conn, corpus)
            active, previous = await self._serving(conn, corpus)
            if previous is None:
                raise _conflict(f"corpus {corpus!r} has no previous index version to roll back to",
                                corpus=corpus)
            return await self._swap(conn, corpus, active, previous, actor, reason, now)

    async def _swap(self, conn: asyncpg.Connection, corpus: str, active: IndexVersion | None,
                    previous: IndexVersion, actor: str, reason: str, now: datetime) -> PromotionResult:
        # Both rows change in one transaction; the one-active/one-previous constraints are checked
        # at commit, when the swap is complete.
        if active is None:  # unreachable through this API: a previous always comes from an active
            raise _conflict(f"corpus {corpus!r} has a previous but no active index version")
        await self._set_state(conn, active, VersionState.PREVIOUS, actor, reason, now)
        await self._set_state(conn, previous, VersionState.ACTIVE, actor, reason, now)
        return PromotionResult(corpus=corpus, active=previous.index_version, previous=active.index_version,
                               changed=True)

    async def active_version(self, corpus: str) -> IndexVersion | None:
        row = await self._pool.fetchrow(
            f"SELECT {_VERSION_COLUMNS} FROM index_versions WHERE corpus = $1 AND state = 'active'", corpus
        )
        return _version(row) if row is not None else None

    async def get_version(self, corpus: str, index_version: str) -> IndexVersion:
        async with self._pool.acquire() as conn:
            return await self._fetch_version(conn, corpus, index_version)

    async def list_versions(self, corpus: str) -> list[IndexVersion]:
        rows = await self._pool.fetch(
            f"SELECT {_VERSION_COLUMNS} FROM index_versions WHERE corpus = $1 ORDER BY seq DESC", corpus
        )
        return [_version(row) for row in rows]

    async def list_events(self, corpus: str, *, limit: int = 100) -> list[VersionEvent]:
        rows = await self._pool.fetch(
            """SELECT id, corpus, index_version, from_state, to_state, actor, reason, at
               FROM index_version_events WHERE corpus = $1 ORDER BY id DESC LIMIT $2""",
            corpus, limit,
        )
        return [msgspec.convert(dict(row), VersionEvent) for row in rows]

    # --- retirement ------------------------------------------------------------------------------
    async def retire_eligible(self, corpus: str, min_active_age: timedelta) -> list[IndexVersion]:
        served_since = self._clock() - min_active_age
        rows = await self._pool.fetch(
            f"""SELECT {_VERSION_COLUMNS} FROM index_versions v
                WHERE v.corpus = $1 AND v.state IN ('validated', 'failed')
                  AND EXISTS (
                      SELECT 1 FROM index_versions a
                      WHERE a.corpus = v.corpus AND a.state = 'active' AND a.promoted_at <= $2
                        AND (v.state = 'failed' OR v.promoted_at IS NOT NULL OR v.seq < a.seq))
                ORDER BY v.seq""",
            corpus, served_since,
        )
        return [_version(row) for row in rows]

    # --- shared steps ----------------------------------------------------------------------------
    @staticmethod
    async def _lock_corpus(conn: asyncpg.Connection, corpus: str) -> None:
        found = await conn.fetchval("SELECT 1 FROM corpora WHERE id = $1 AND removed_at IS NULL FOR UPDATE",
                                    corpus)
        if found is None:
            raise _not_found(f"unknown corpus {corpus!r}")

    @staticmethod
    async def _fetch_version(conn: asyncpg.Connection, corpus: str, index_version: str) -> IndexVersion:
        row = await conn.fetchrow(
            f"SELECT {_VERSION_COLUMNS} FROM index_versions WHERE corpus = $1 AND index_version = $2",
            corpus, index_version,
        )
        if row is None:
            raise _not_found(f"unknown index version {index_version!r} of corpus {corpus!r}")
        return _version(row)

    @staticmethod
    async def _serving(
        conn: asyncpg.Connection, corpus: str
    ) -> tuple[IndexVersion | None, IndexVersion | None]:
        """(active, previous) of the corpus; call with the corpus locked."""
        rows = await conn.fetch(
            f"""SELECT {_VERSION_COLUMNS} FROM index_versions
                WHERE corpus = $1 AND state IN ('active', 'previous')""",
            corpus,
        )
        by_state = {row["state"]: _version(row) for row in rows}
        return by_state.get("active"), by_state.get("previous")

    @staticmethod
    def _check(version: IndexVersion, to_state: VersionState) -> None:
        if to_state not in ALLOWED_TRANSITIONS[version.state]:
            raise _conflict(
                f"index version {version.index_version!r} is {version.state.value} and cannot become "
                f"{to_state.value}",
                corpus=version.corpus, index_version=version.index_version, state=version.state.value,
            )

    async def _set_state(self, conn: asyncpg.Connection, version: IndexVersion, to_state: VersionState,
                         actor: str, reason: str, now: datetime) -> None:
        self._check(version, to_state)
        await conn.execute(
            """UPDATE index_versions SET state = $3, updated_at = $4,
                   promoted_at = CASE WHEN $3 = 'active' THEN $4 ELSE promoted_at END
               WHERE corpus = $1 AND index_version = $2""",
            version.corpus, version.index_version, to_state.value, now,
        )
        await self._record(conn, version.corpus, version.index_version, version.state, to_state,
                           actor, reason, now)

    @staticmethod
    async def _record(conn: asyncpg.Connection, corpus: str, index_version: str,
                      from_state: VersionState | None, to_state: VersionState, actor: str, reason: str,
                      at: datetime) -> None:
        await conn.execute(
            """INSERT INTO index_version_events
                   (corpus, index_version, from_state, to_state, actor, reason, at)
               VALUES ($1, $2, $3, $4, $5, $6, $7)""",
            corpus, index_version, from_state.value if from_state else None, to_state.value,
            actor, reason, at,
        )
