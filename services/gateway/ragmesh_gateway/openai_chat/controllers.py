"""POST /v1/chat/completions and GET /v1/models: ragmesh as a grounded model for OpenAI clients
(the SDKs, Open WebUI, LibreChat). Same tokens (``Authorization: Bearer`` is what those clients send
as their API key), scopes, corpus ACL and rate limits as /chat; errors in OpenAI's error shape
(``API_PREFIX`` is given its own body shape in the app's error handler).
"""

from __future__ import annotations

from litestar import Controller, Request, get, post
from litestar.openapi import ResponseSpec
from litestar.response import ServerSentEvent

from ragmesh_common.telemetry import request_id_var

from ragmesh_gateway.access.ports import Caller, RouteClass
from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.chat.service import ChatService
from ragmesh_gateway.citations import public_origin
from ragmesh_gateway.openai_chat.presenters import chunks, completion
from ragmesh_gateway.openai_chat.schemas import (
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Model,
    ModelList,
    OpenAiError,
)
from ragmesh_gateway.openai_chat.service import OpenAiChatService, model_not_found
from ragmesh_gateway.settings import GatewaySettings

COMPLETIONS_DESCRIPTION = """OpenAI's Chat Completions API over ragmesh's grounded chat. The answer to the last
user message cites its sources as Markdown links [S1](url), each with a `url_citation` annotation in
`message.annotations` (absolute url, title, start_index/end_index of the link in the content); the
`ragmesh` field lists the sources (quote, url, source_lines, index_versions). `stream: true` sends
`chat.completion.chunk` events, one per verified piece of the answer with its annotations in
`delta.annotations` (each with its `index`), the finishing chunk with `ragmesh`, then `data: [DONE]`;
a failure after the stream started is a `data: {"error": ...}` event. Refusals and
withheld answers are ordinary assistant messages that say so. n > 1, tools, images and other options a
grounded answer cannot honour are 400 with their `param`; sampling options are accepted and change nothing."""


def _errors(*statuses: int) -> dict[int, ResponseSpec]:
    return {s: ResponseSpec(data_container=OpenAiError, description="OpenAI error body", generate_examples=False)
            for s in statuses}


API_PREFIX = "/v1"


class OpenAiController(Controller):
    path = API_PREFIX
    tags = ["openai"]

    @get("/models", summary="Models: one per readable corpus, plus 'ragmesh' for all",
         opt={"route_class": RouteClass.READ, "scope": Scope.ANSWER}, responses=_errors(401, 403, 429))
    async def models(self, caller: Caller, openai_chat: OpenAiChatService) -> ModelList:
        service = openai_chat
        return ModelList(data=[Model(id=m, created=service.started_at) for m in service.models(caller)])

    @get("/models/{model_id:path}", summary="One model",
         opt={"route_class": RouteClass.READ, "scope": Scope.ANSWER}, responses=_errors(401, 403, 404, 429))
    async def model(self, model_id: str, caller: Caller, openai_chat: OpenAiChatService) -> Model:
        service = openai_chat
        model_id = model_id.removeprefix("/")
        if model_id not in service.models(caller):
            raise model_not_found(model_id)
        return Model(id=model_id, created=service.started_at)

    @post(
        "/chat/completions",
        status_code=200,
        summary="Grounded chat completion (OpenAI-compatible)",
        description=COMPLETIONS_DESCRIPTION,
        opt={"route_class": RouteClass.CHAT, "scope": Scope.ANSWER},
        responses={
            200: ResponseSpec(data_container=ChatCompletion | ChatCompletionChunk,  # type: ignore[arg-type]
                              description="A chat.completion, or with stream: true server-sent "
                              "chat.completion.chunk events", generate_examples=False),
            **_errors(400, 401, 403, 404, 413, 415, 429, 502, 503, 504),
        },
    )
    async def chat_completions(
        self,
        data: ChatCompletionRequest,
        caller: Caller,
        openai_chat: OpenAiChatService,
        chat: ChatService,
        settings: GatewaySettings,
        request: Request,
    ) -> ChatCompletion | ServerSentEvent:
        plan = openai_chat.plan(data, caller)
        request_id = request_id_var.get()
        origin = public_origin(settings.public_url, request.scope)
        if not plan.stream:
            return completion(plan, await chat.answer(plan.params, caller), request_id, origin)
        session = await openai_chat.open(plan, caller)
        return ServerSentEvent(
            chunks(plan, session, request_id, settings.heartbeat_s, origin),
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )
