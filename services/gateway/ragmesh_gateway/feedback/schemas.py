"""HTTP contract of feedback: thumbs up or down on one answer, named by its request id."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta

from ragmesh_common.telemetry import REQUEST_ID_PATTERN
from ragmesh_gateway.feedback.ports import MAX_COMMENT_CHARS, MAX_REQUEST_ID_CHARS


class FeedbackRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Rate an answer."""

    request_id: Annotated[
        str,
        Meta(
            min_length=1, max_length=MAX_REQUEST_ID_CHARS, pattern=REQUEST_ID_PATTERN,
            description="meta.request_id of the rated answer.",
        ),
    ]
    rating: Annotated[int, Meta(ge=-1, le=1, description="1 helpful, -1 not helpful (0 is refused).",
                                extra_json_schema={"extra": {"enum": [-1, 1]}})]
    comment: (
        Annotated[str, Meta(max_length=MAX_COMMENT_CHARS, description="Optional free text.")] | None
    ) = None


class FeedbackResponse(msgspec.Struct, kw_only=True):
    request_id: Annotated[str, Meta(description="This request's id.")]
    feedback_id: int
    rated_request_id: str
