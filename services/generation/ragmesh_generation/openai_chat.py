"""The ChatModel port over an OpenAI-compatible ``/v1/chat/completions`` stream (vLLM or the CPU
runtime), through ragmesh_common's ChatClient."""

from __future__ import annotations

import logging
from typing import AsyncIterator

from ragmesh_common.clients.llm import ChatClient
from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_generation.ports import ChatModel, ModelDelta

log = logging.getLogger("ragmesh.generation")


class OpenAIChatModel(ChatModel):
    system = "openai"

    def __init__(self, client: ChatClient) -> None:
        self._client = client

    async def model_id(self) -> str:
        try:
            return await self._client.resolve_model()
        except RagmeshError:
            raise
        except Exception as exc:  # a runtime answering /v1/models with something unparseable
            log.warning("model list unreadable", extra={"fields": {"error": type(exc).__name__}})
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "generation runtime returned a malformed model list") from None

    async def stream(self, messages: list[dict[str, str]], *, max_tokens: int) -> AsyncIterator[ModelDelta]:
        upstream = self._client.stream_chat(messages, max_tokens=max_tokens)
        try:
            async for delta in upstream:
                yield ModelDelta(delta.text, delta.finish_reason, delta.model)
        except RagmeshError:
            raise
        except Exception as exc:
            # Garbage in the event stream (invalid JSON, missing fields) surfaces from the SDK as
            # plain ValueError/TypeError/KeyError; to callers it is one thing: a broken runtime.
            log.warning("chat stream unreadable", extra={"fields": {"error": type(exc).__name__}})
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "generation runtime sent a malformed stream") from None
        finally:
            await upstream.aclose()

    async def close(self) -> None:
        await self._client.close()
