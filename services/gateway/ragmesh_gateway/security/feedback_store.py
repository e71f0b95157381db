"""FeedbackStore: thumbs up (1) / down (-1) on one response, in PostgreSQL (table ``feedback``).

A binary rating because that is what a chat UI asks for and what can be compared over time; a
free-text comment (at most 2000 characters) carries the nuance.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import asyncpg

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.security.database import database_errors
from ragmesh_gateway.security.metrics import count_feedback

RATINGS = (-1, 1)
MAX_COMMENT_CHARS = 2000
MAX_REQUEST_ID_CHARS = 128


@dataclass(frozen=True, slots=True)
class Feedback:
    feedback_id: int
    request_id: str
    rating: int
    comment: str | None
    client_id: str | None
    created_at: datetime


def check_feedback(request_id: str, rating: int, comment: str | None) -> None:
    if (not isinstance(request_id, str) or not 1 <= len(request_id) <= MAX_REQUEST_ID_CHARS
            or not request_id.isprintable()):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT,
                           f"request_id must be 1-{MAX_REQUEST_ID_CHARS} printable characters")
    if isinstance(rating, bool) or rating not in RATINGS:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "rating must be 1 (helpful) or -1 (not helpful)")
    if comment is not None and (not isinstance(comment, str) or len(comment) > MAX_COMMENT_CHARS):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT,
                           f"comment must be at most {MAX_COMMENT_CHARS} characters")


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
