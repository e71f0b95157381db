"""FeedbackSink over PostgreSQL: the gateway schema's ``feedback`` table through FeedbackStore.

The pool is opened on first use, not at start-up: feedback is optional, so PostgreSQL being down
must cost the feedback route a 503, never the gateway its start. The gateway migrations are applied
then (idempotent; replicas serialise on an advisory lock); a failed open is retried next time.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from ragmesh_common.pg import create_pool

from ragmesh_gateway.feedback.metrics import count_feedback
from ragmesh_gateway.feedback.ports import FeedbackEntry, FeedbackSink, check_feedback
from ragmesh_gateway.store.database import GATEWAY_SCHEMA, database_errors, migrate


class PostgresFeedback(FeedbackSink):
    def __init__(self, postgres_url: str, *, schema: str = GATEWAY_SCHEMA) -> None:
        self._url = postgres_url
        self._schema = schema
        self._pool: asyncpg.Pool | None = None
        self._store: FeedbackStore | None = None
        self._opening = asyncio.Lock()

    async def add(self, entry: FeedbackEntry) -> int:
        store = await self._ready()
        return await store.add(entry.request_id, entry.rating, entry.comment, entry.client_id)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool, self._store = None, None

    async def _ready(self) -> FeedbackStore:
        async with self._opening:
            if self._store is None:
                async with database_errors("open feedback storage"):
                    # Two connections: feedback is a trickle and must not crowd the token store.
                    pool = await create_pool(self._url, schema=self._schema, min_size=1, max_size=2)
                try:
                    async with database_errors("migrate feedback storage"):
                        await migrate(pool, schema=self._schema)
                except BaseException:
                    await pool.close()
                    raise
                self._pool, self._store = pool, FeedbackStore(pool)
            return self._store


@dataclass(frozen=True, slots=True)
class Feedback:
    feedback_id: int
    request_id: str
    rating: int
    comment: str | None
    client_id: str | None
    created_at: datetime


class FeedbackStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def add(self, request_id: str, rating: int, comment: str | None = None,
                  client_id: str | None = None) -> int:
        """Record feedback; returns its id. ``client_id`` is None for anonymous callers."""
        check_feedback(request_id, rating, comment)
        # PostgreSQL text cannot hold NUL; dropping it is kinder than refusing the comment.
        comment = comment.replace("\x00", "") if comment else None
        async with database_errors("add feedback"):
            feedback_id = await self._pool.fetchval(
                "INSERT INTO feedback (request_id, rating, comment, client_id) VALUES ($1, $2, $3, $4) "
                "RETURNING feedback_id",
                request_id, rating, comment, client_id[:128] if client_id else None,
            )
        count_feedback(rating)
        return int(feedback_id)

    async def list(self, request_id: str | None = None, *, limit: int = 100) -> list[Feedback]:
        async with database_errors("list feedback"):
            rows = await self._pool.fetch(
                "SELECT feedback_id, request_id, rating, comment, client_id, created_at FROM feedback "
                "WHERE $1::text IS NULL OR request_id = $1 ORDER BY feedback_id DESC LIMIT $2",
                request_id, max(1, min(limit, 1000)),
            )
        return [Feedback(**dict(row)) for row in rows]
