"""Where feedback goes: the FeedbackSink port, and the stand-in used when nothing is configured."""

from __future__ import annotations

import abc
from dataclasses import dataclass

from ragmesh_common.errors import ErrorCode, RagmeshError


@dataclass(frozen=True, slots=True)
class FeedbackEntry:
    request_id: str  # the request id of the answer being rated (meta.request_id)
    rating: int  # 1 helpful, -1 not helpful
    comment: str | None
    client_id: str | None  # None for anonymous callers


class FeedbackSink(abc.ABC):
    @abc.abstractmethod
    async def add(self, entry: FeedbackEntry) -> int:
        """Store one entry; its id. Raises RagmeshError INVALID_ARGUMENT or UNAVAILABLE."""


class NoFeedbackStorage(FeedbackSink):
    """Without RAGMESH_POSTGRES_URL feedback cannot be kept; saying so beats dropping it silently."""

    async def add(self, entry: FeedbackEntry) -> int:
        raise RagmeshError(ErrorCode.UNAVAILABLE, "feedback storage is not configured (RAGMESH_POSTGRES_URL)")
