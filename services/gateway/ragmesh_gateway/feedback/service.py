"""Feedback on answers: validated once, stored through the FeedbackSink port, counted by the store."""

from __future__ import annotations

import logging

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.feedback.ports import FeedbackEntry, FeedbackSink
from ragmesh_gateway.feedback.ports import check_feedback

log = logging.getLogger("ragmesh.gateway.feedback")


class FeedbackService:
    def __init__(self, sink: FeedbackSink) -> None:
        self._sink = sink

    async def submit(self, request_id: str, rating: int, comment: str | None, caller: Caller) -> int:
        if comment is not None:
            comment = comment.strip() or None
        check_feedback(request_id, rating, comment)
        # Anonymous site traffic has no client id worth keeping (an address is personal data).
        client_id = caller.principal if caller.authenticated else None
        feedback_id = await self._sink.add(FeedbackEntry(request_id, rating, comment, client_id))
        # The comment stays in the database; the log gets its length only.
        log.info("feedback", extra={"fields": {"rating": rating, "comment_chars": len(comment or ""),
                                               "feedback_id": feedback_id}})
        return feedback_id
