"""Feedback on one answer: what a valid entry is, the FeedbackSink port, and the stand-in used when
nothing is configured.

A binary rating because that is what a chat UI asks for and what can be compared over time; a
free-text comment (at most 2000 characters) carries the nuance.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass

from ragmesh_common.errors import ErrorCode, RagmeshError

RATINGS = (-1, 1)
MAX_COMMENT_CHARS = 2000
MAX_REQUEST_ID_CHARS = 128


@dataclass(frozen=True, slots=True)
class FeedbackEntry:
    request_id: str  # the request id of the answer being rated (meta.request_id)
    rating: int  # 1 helpful, -1 not helpful
    comment: str | None
    client_id: str | None  # None for anonymous callers


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


class FeedbackSink(abc.ABC):
    @abc.abstractmethod
    async def add(self, entry: FeedbackEntry) -> int:
        """Store one entry; its id. Raises RagmeshError INVALID_ARGUMENT or UNAVAILABLE."""


class NoFeedbackStorage(FeedbackSink):
    """Without RAGMESH_POSTGRES_URL feedback cannot be kept; saying so beats dropping it silently."""

    async def add(self, entry: FeedbackEntry) -> int:
        raise RagmeshError(ErrorCode.UNAVAILABLE, "feedback storage is not configured (RAGMESH_POSTGRES_URL)")
