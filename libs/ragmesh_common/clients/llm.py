"""Streaming chat completions through the OpenAI-compatible API (vLLM, or the CPU runtime)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import AsyncIterator, Sequence

import httpx
import openai

from ragmesh_common.clients import KEEPALIVE_EXPIRY_S
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import with_request_context


@dataclass(frozen=True)
class ChatDelta:
    text: str
    finish_reason: str | None = None
    model: str = ""


class ChatClient:
    def __init__(
        self, base_url: str, model: str, *, api_key: str = "unused", timeout: float = 60.0,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self.model = model
        self._client = openai.AsyncOpenAI(
            base_url=base_url, api_key=api_key or "unused", timeout=timeout, max_retries=0,
            http_client=with_request_context(http_client or httpx.AsyncClient(
                timeout=timeout, limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY_S))),
        )

    async def close(self) -> None:
        await self._client.close()

    async def is_serving(self, *, timeout: float = 1.0) -> bool:
        """The runtime answers its model list now (vLLM and the CPU runtime both serve it)."""
        try:
            await self._client.with_options(timeout=timeout).models.list()
        except openai.APIError:
            return False
        return True

    async def resolve_model(self) -> str:
        """The served model id when none is configured (the runtime serves exactly one)."""
        if self.model:
            return self.model
        try:
            models = await self._client.models.list()
        except openai.APIError as exc:
            raise _map(exc) from None
        ids = [m.id for m in models.data]
        if not ids:
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "generation runtime serves no model")
        self.model = ids[0]
        return self.model

    async def stream_chat(
        self, messages: list[dict[str, str]], *, max_tokens: int, temperature: float = 0.0,
        stop: Sequence[str] = (),
    ) -> AsyncIterator[ChatDelta]:
        model = await self.resolve_model()
        try:
            stream = await self._client.chat.completions.create(
                model=model, messages=messages, max_tokens=max_tokens, temperature=temperature, stream=True,
                stop=list(stop) if stop else openai.NOT_GIVEN,
            )
            # `async with` closes the HTTP stream as soon as the consumer stops (cancel, early exit).
            async with stream:
                async for chunk in stream:
                    if not chunk.choices:
                        continue
                    choice = chunk.choices[0]
                    text = (choice.delta.content or "") if choice.delta else ""
                    if text or choice.finish_reason:
                        yield ChatDelta(text=text, finish_reason=choice.finish_reason, model=chunk.model or model)
        except openai.APIError as exc:
            raise _map(exc) from None
        except ValueError:
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "generation runtime sent a malformed stream") from None


def _map(exc: openai.APIError) -> RagmeshError:
    if isinstance(exc, openai.APITimeoutError):
        return RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "generation runtime timed out")
    if isinstance(exc, openai.APIConnectionError):
        return RagmeshError(ErrorCode.UNAVAILABLE, "generation runtime unreachable")
    if isinstance(exc, openai.BadRequestError):
        return RagmeshError(ErrorCode.INVALID_ARGUMENT, "generation runtime rejected the request")
    return RagmeshError(ErrorCode.RUNTIME_ERROR, f"generation runtime error ({type(exc).__name__})")
