"""POST /chat/stream (server-sent events) and POST /chat (the whole answer at once)."""

from __future__ import annotations

from litestar import Controller, Request, post
from litestar.openapi import ResponseSpec
from litestar.response import ServerSentEvent

from ragmesh_common.telemetry import request_id_var

from ragmesh_gateway.access.ports import Caller, RouteClass
from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.citations import public_origin
from ragmesh_gateway.chat.presenters import answer_response, chat_params
from ragmesh_gateway.chat.schemas import (
    AnswerResponse,
    ChatDone,
    ChatError,
    ChatMeta,
    ChatRequest,
    ChatSources,
    ChatToken,
)
from ragmesh_gateway.chat.service import ChatService
from ragmesh_gateway.chat.sse import sse_messages
from ragmesh_gateway.settings import GatewaySettings
from ragmesh_gateway.web.errors import error_responses

API = "/api/rag/v1"

STREAM_DESCRIPTION = """Server-sent events, in order: `meta` (request_id, index_version, model, session_id,
degraded, condensed_question), `token`* ({text}), exactly one `sources` ({sources, security, basis}),
then exactly one terminal event: `done` ({answer_status, model, finish_reason, degraded, hint}) or
`error` ({code, message, request_id, degraded}). `basis` is "cited" (the sources the answer cites) or
"retrieved" (no answer could be given: the retrieval results instead). Comment lines `: ping` keep
the stream open during long waits. Errors found before the stream starts (bad input, an unknown
session_id, retrieval down) are ordinary JSON error answers."""


class ChatController(Controller):
    path = API
    tags = ["chat"]
    opt = {"route_class": RouteClass.CHAT, "scope": Scope.ANSWER}

    @post(
        "/chat/stream",
        status_code=200,
        summary="Grounded answer, streamed",
        description=STREAM_DESCRIPTION,
        responses={
            200: ResponseSpec(
                data_container=ChatMeta | ChatToken | ChatSources | ChatDone | ChatError,  # type: ignore[arg-type]
                media_type="text/event-stream",
                description="Event stream; each event's data is one of these JSON objects",
                generate_examples=False,
            ),
            **error_responses(400, 401, 404, 413, 415, 429, 503, 504),
        },
    )
    async def stream(
        self, data: ChatRequest, caller: Caller, chat: ChatService, settings: GatewaySettings,
        request: Request,
    ) -> ServerSentEvent:
        session = await chat.open(chat_params(data), caller)
        return ServerSentEvent(
            sse_messages(session, request_id_var.get(), settings.heartbeat_s,
                         public_origin(settings.public_url, request.scope)),
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @post(
        "/chat",
        status_code=200,
        summary="Grounded answer, all at once",
        description="The same pipeline as /chat/stream. Generation down before any text: `status: done`, "
        "`answer_status: withheld` and the retrieval summary (`sources_basis: retrieved`); a generation failure "
        "after part of the answer comes back in `error`.",
        responses=error_responses(400, 401, 404, 413, 415, 429, 503, 504),
    )
    async def answer(self, data: ChatRequest, caller: Caller, chat: ChatService, request: Request,
                     settings: GatewaySettings) -> AnswerResponse:
        collected = await chat.answer(chat_params(data), caller)
        origin = public_origin(settings.public_url, request.scope)
        return answer_response(collected, request_id_var.get(), origin)
