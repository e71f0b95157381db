"""vLLM's OpenAI-compatible API: /v1/chat/completions (streamed or not) and /v1/models.

The "model" behind it is the extractive answerer, and its id says so.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import AsyncIterator

import msgspec
from litestar import Controller, Request, Response, get, post
from litestar.di import Provide
from litestar.response import Stream

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_runtime.generator.prompt_protocol import ChatTurn
from ragmesh_runtime.generator.word_chunks import count_word_chunks, word_chunks
from ragmesh_runtime.http.schemas import ChatCompletionRequest, decode_body, message_text
from ragmesh_runtime.http.tei_routes import provide_service
from ragmesh_runtime.service import RuntimeService

_encode = msgspec.json.encode


class OpenAiController(Controller):
    path = "/v1"
    dependencies = {"service": Provide(provide_service, sync_to_thread=False)}

    @get("/models")
    async def models(self, service: RuntimeService) -> Response[bytes]:
        model_id = service.settings.generator.model_id
        card = {
            "id": model_id,
            "object": "model",
            "created": int(service.started_at),
            "owned_by": "ragmesh",
            "root": model_id,
            "parent": None,
            "max_model_len": service.settings.generator.max_prompt_chars,
            "permission": [],
        }
        return Response(content=_encode({"object": "list", "data": [card]}), media_type="application/json")

    @post("/chat/completions", status_code=200)
    async def chat_completions(self, request: Request, service: RuntimeService) -> Response:
        body = decode_body(await request.body(), ChatCompletionRequest)
        model_id = service.settings.generator.model_id
        if body.model is not None and body.model != model_id:
            raise RagmeshError(ErrorCode.NOT_FOUND, f"The model `{body.model}` does not exist.")
        if body.n != 1:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "n must be 1: the answer is deterministic")
        if not body.messages:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "messages must not be empty")
        limit = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
        if limit is not None and limit < 1:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "max_tokens must be at least 1")

        turns = [ChatTurn(message.role, message_text(message)) for message in body.messages]
        answer = await service.answer(turns)
        pieces = word_chunks(answer.text)
        finish_reason = "stop"
        if limit is not None and len(pieces) > limit:
            pieces, finish_reason = pieces[:limit], "length"
        completion = Completion(
            id=f"chatcmpl-{uuid.uuid4().hex}",
            created=int(time.time()),
            model=model_id,
            prompt_tokens=sum(count_word_chunks(turn.content) for turn in turns),
            pieces=pieces,
            finish_reason=finish_reason,
        )
        if body.stream:
            include_usage = body.stream_options is not None and body.stream_options.include_usage
            return Stream(
                completion.events(include_usage),
                media_type="text/event-stream",
                headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
            )
        return Response(content=_encode(completion.message()), media_type="application/json")


class Completion(msgspec.Struct):
    id: str
    created: int
    model: str
    prompt_tokens: int
    pieces: list[str]
    finish_reason: str

    def usage(self) -> dict[str, int]:
        completion_tokens = len(self.pieces)
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": self.prompt_tokens + completion_tokens,
        }

    def message(self) -> dict[str, object]:
        """The non-streamed ``chat.completion`` object."""
        return {
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(self.pieces), "refusal": None},
                    "logprobs": None,
                    "finish_reason": self.finish_reason,
                }
            ],
            "usage": self.usage(),
            "system_fingerprint": None,
        }

    async def events(self, include_usage: bool) -> AsyncIterator[bytes]:
        """``chat.completion.chunk`` server-sent events: role, one piece each, finish, [DONE]."""
        yield self._event({"role": "assistant", "content": ""}, None, include_usage)
        for piece in self.pieces:
            yield self._event({"content": piece}, None, include_usage)
            await asyncio.sleep(0)  # let each piece go out on its own, as a model's tokens would
        yield self._event({}, self.finish_reason, include_usage)
        if include_usage:
            yield self._frame({**self._chunk_head(), "choices": [], "usage": self.usage()})
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
