"""vLLM's OpenAI-compatible API: /v1/chat/completions (streamed or not) and /v1/models.

What answers is the configured generator profile (ragmesh_runtime.chat): the extractive answerer
by default, whose id says it is not an LLM, or a GGUF model through llama.cpp. Both stream the
same chunks; errors a generator raises before its first piece (a prompt too long for the model's
context, an overloaded queue) are answered as errors, not as a stream that breaks.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import AsyncIterator

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.datastructures import State
from litestar.di import Provide
from litestar.response import Stream

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_runtime.chat import ChatEvent, ChatFinish, ChatGenerator, ChatOptions
from ragmesh_runtime.generator.prompt_protocol import ChatTurn
from ragmesh_runtime.http.schemas import ChatCompletionRequest, decode_body, message_text
from ragmesh_runtime.http.tei_routes import provide_service
from ragmesh_runtime.service import RuntimeService

_encode = msgspec.json.encode


def provide_chat_generator(state: State) -> ChatGenerator:
    return state.chat_generator


class OpenAiController(Controller):
    path = "/v1"
    dependencies = {
        "service": Provide(provide_service, sync_to_thread=False),
        "generator": Provide(provide_chat_generator, sync_to_thread=False),
    }

    @get("/models")
    async def models(self, service: RuntimeService, generator: ChatGenerator) -> Response[bytes]:
        model_id = generator.model_id
        card = {
            "id": model_id,
            "object": "model",
            "created": int(service.started_at),
            "owned_by": "ragmesh",
            "root": model_id,
            "parent": None,
            "max_model_len": generator.max_model_len,
            "permission": [],
            **generator.card(),
        }
        return Response(content=_encode({"object": "list", "data": [card]}), media_type="application/json")

    @post("/chat/completions", status_code=200)
    async def chat_completions(self, request: Request, generator: ChatGenerator) -> Response:
        body = decode_body(await request.body(), ChatCompletionRequest)
        model_id = generator.model_id
        if body.model is not None and body.model != model_id:
            raise RagmeshError(ErrorCode.NOT_FOUND, f"The model `{body.model}` does not exist.")
        if body.n != 1:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "n must be 1: one answer per request")
        if not body.messages:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "messages must not be empty")
        limit = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
        if limit is not None and limit < 1:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "max_tokens must be at least 1")
        stop = (body.stop,) if isinstance(body.stop, str) else tuple(body.stop or ())
        options = ChatOptions(max_tokens=limit, temperature=body.temperature, top_p=body.top_p,
                              stop=stop, seed=body.seed)

        turns = [ChatTurn(message.role, message_text(message)) for message in body.messages]
        events = generator.complete(turns, options)
        first = await anext(events)  # bad input raises here, before the response starts
        completion = Completion(id=f"chatcmpl-{uuid.uuid4().hex}", created=int(time.time()), model=model_id)
        if body.stream:
            include_usage = body.stream_options is not None and body.stream_options.include_usage
            return Stream(
                completion.events(first, events, include_usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        pieces: list[str] = []
        event = first
        while not isinstance(event, ChatFinish):
            pieces.append(event)
            event = await anext(events)
        return Response(content=_encode(completion.message("".join(pieces), event)), media_type="application/json")


class Completion(msgspec.Struct):
    id: str
    created: int
    model: str

    @staticmethod
    def usage(finish: ChatFinish) -> dict[str, int]:
        return {
            "prompt_tokens": finish.prompt_tokens,
            "completion_tokens": finish.completion_tokens,
            "total_tokens": finish.prompt_tokens + finish.completion_tokens,
        }

    def message(self, content: str, finish: ChatFinish) -> dict[str, object]:
        """The non-streamed ``chat.completion`` object."""
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, "refusal": None},
                    "logprobs": None,
                    "finish_reason": finish.reason,
                }
            ],
            "usage": self.usage(finish),
            "system_fingerprint": None,
        }

    async def events(
        self, first: ChatEvent, rest: AsyncIterator[ChatEvent], include_usage: bool
    ) -> AsyncIterator[bytes]:
        """``chat.completion.chunk`` server-sent events: role, one piece each, finish, [DONE]."""
        yield self._event({"role": "assistant", "content": ""}, None, include_usage)
        event = first
        try:
            while not isinstance(event, ChatFinish):
                yield self._event({"content": event}, None, include_usage)
                await asyncio.sleep(0)  # let each piece go out on its own
                event = await anext(rest)
        finally:
            await rest.aclose()  # a client that left stops the generation
        yield self._event({}, event.reason, include_usage)
        if include_usage:
            yield self._frame({**self._chunk_head(), "choices": [], "usage": self.usage(event)})
        yield b"data: [DONE]\n\n"

    def _chunk_head(self) -> dict[str, object]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
        }

    def _event(self, delta: dict[str, str], finish_reason: str | None, include_usage: bool) -> bytes:
        chunk: dict[str, object] = {
            **self._chunk_head(),
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}],
        }
        if include_usage:
            chunk["usage"] = None
        return self._frame(chunk)

    @staticmethod
    def _frame(chunk: dict[str, object]) -> bytes:
        return b"data: " + _encode(chunk) + b"\n\n"
