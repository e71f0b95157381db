"""FeedbackSink over PostgreSQL: the gateway schema's ``feedback`` table through FeedbackStore.

The pool is opened on first use, not at start-up: feedback is optional, so PostgreSQL being down
must cost the feedback route a 503, never the gateway its start. The gateway migrations are applied
then (idempotent; replicas serialise on an advisory lock); a failed open is retried next time.
"""

from __future__ import annotations

import asyncio

import asyncpg

from ragmesh_common.pg import create_pool

from ragmesh_gateway.feedback.ports import FeedbackEntry, FeedbackSink
from ragmesh_gateway.security.database import GATEWAY_SCHEMA, database_errors, migrate
from ragmesh_gateway.security.feedback_store import FeedbackStore


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
