"""The ChatModel port over an OpenAI-compatible ``/v1/chat/completions`` stream (vLLM, llama.cpp's
server or the CPU runtime), through ragmesh_common's ChatClient; plus what such servers say about
the model beside the API: its context length (``/v1/models``) and its tokenizer (``/tokenize``).

Messages go out as plain role/content pairs: the runtime applies the model's own chat template.
"""

from __future__ import annotations

import logging
from typing import Any, AsyncIterator, Sequence

import httpx

from ragmesh_common.clients.llm import ChatClient
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import with_request_context

from ragmesh_generation.ports import ChatModel, ModelDelta

log = logging.getLogger("ragmesh.generation")

#: Looking at /v1/models or /tokenize must never hold an answer up for long.
INFO_TIMEOUT_S = 5.0


class OpenAIChatModel(ChatModel):
    system = "openai"

    def __init__(self, client: ChatClient, *, base_url: str = "", api_key: str = "", stop: Sequence[str] = (),
                 http: httpx.AsyncClient | None = None) -> None:
        self._client = client
        self._stop = tuple(stop)
        self._base = base_url.rstrip("/")
        # llama.cpp and vLLM serve /tokenize beside /v1, not under it.
        self._root = self._base.removesuffix("/v1")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = http or with_request_context(httpx.AsyncClient(timeout=INFO_TIMEOUT_S, headers=headers))
        self._context: int | None = None
        self._context_known = False
        self._tokenizer: bool | None = None  # None: not asked yet

    async def model_id(self) -> str:
        try:
            return await self._client.resolve_model()
        except RagmeshError:
            raise
        except Exception as exc:  # a runtime answering /v1/models with something unparseable
            log.warning("model list unreadable", extra={"fields": {"error": type(exc).__name__}})
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "generation runtime returned a malformed model list") from None

    async def stream(self, messages: list[dict[str, str]], *, max_tokens: int) -> AsyncIterator[ModelDelta]:
        upstream = self._client.stream_chat(messages, max_tokens=max_tokens, stop=self._stop)
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

    async def context_tokens(self) -> int | None:
        """vLLM's ``max_model_len`` or llama.cpp's ``meta.n_ctx`` of the served model (asked once)."""
        if self._context_known or not self._base:
            return self._context
        try:
            response = await self._http.get(f"{self._base}/models")
        except httpx.HTTPError:
            return None  # down now: ask again next time
        self._context_known = True
        try:
            card: dict[str, Any] = response.json()["data"][0]
            length = card.get("max_model_len") or (card.get("meta") or {}).get("n_ctx")
            self._context = int(length) if isinstance(length, int) and length > 0 else None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            self._context = None
        log.info("model context", extra={"fields": {"context_tokens": self._context}})
        return self._context

    async def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        """The runtime's own token counts (llama.cpp: ``{"content"}`` -> ``{"tokens"}``; vLLM:
        ``{"prompt"}`` -> ``{"count"}``); None once the runtime has shown it has no such tokenizer."""
        if self._tokenizer is False or not self._root:
            return None
        counts = []
        for text in texts:
            try:
                response = await self._http.post(f"{self._root}/tokenize",
                                                  json={"content": text, "prompt": text, "add_special": False})
                body = response.json() if response.status_code == 200 else None
                count = body.get("count", len(body["tokens"])) if isinstance(body, dict) else None
            except httpx.HTTPError:
                return None
            except (ValueError, KeyError, TypeError):
                count = None
            if not isinstance(count, int):
                # The CPU runtime's /tokenize is TEI's (the embedder's tokenizer, another body).
                self._tokenizer = False
                log.info("runtime has no generation tokenizer; estimating tokens")
                return None
            self._tokenizer = True
            counts.append(count)
        return counts

    async def close(self) -> None:
        await self._client.close()
        await self._http.aclose()
