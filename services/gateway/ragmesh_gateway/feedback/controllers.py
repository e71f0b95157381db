"""POST /feedback: a rating of one answer, open to anonymous site traffic under its own rate limit."""

from __future__ import annotations

from litestar import Controller, post

from ragmesh_common.telemetry import request_id_var

from ragmesh_gateway.access.ports import Caller, RouteClass
from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.feedback.schemas import FeedbackRequest, FeedbackResponse
from ragmesh_gateway.feedback.service import FeedbackService
from ragmesh_gateway.web.errors import error_responses

API = "/api/rag/v1"


class FeedbackController(Controller):
    path = API
    tags = ["chat"]
    # Whoever may ask for an answer may rate it; the feedback route class has its own bucket
    # (RAGMESH_RATE_LIMITS "feedback=0.2/5"), so ratings cannot spend the chat budget or vice versa.
    opt = {"route_class": RouteClass.FEEDBACK, "scope": Scope.ANSWER}

    @post(
        "/feedback",
        status_code=201,
        summary="Rate an answer",
        description="Thumbs up (1) or down (-1) on the answer with this request_id, with an optional "
        "comment (at most 2000 characters). Stored in PostgreSQL; counted in ragmesh_feedback_total.",
        responses=error_responses(400, 401, 413, 415, 429, 503),
    )
    async def submit(
        self, data: FeedbackRequest, caller: Caller, feedback: FeedbackService
    ) -> FeedbackResponse:
        feedback_id = await feedback.submit(data.request_id, data.rating, data.comment, caller)
        return FeedbackResponse(request_id=request_id_var.get(), feedback_id=feedback_id,
                                rated_request_id=data.request_id)
