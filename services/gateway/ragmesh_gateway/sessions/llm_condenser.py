"""Condensing follow-ups with a chat model (``RAGMESH_CHAT_CONDENSER=llm``), rules as the fallback.

The model sees the recent turns and the follow-up and is asked for one standalone question. Its
reply is only used when it looks like one: a single line, not empty, at most
``MAX_CONDENSED_CHARS`` characters, not the runtime's refusal sentinel. A model that is down, slow
(``timeout_s``) or replies with anything else leaves the rule condenser's result in place, and the
fallback is counted (``ragmesh_degraded_total{service="gateway",component="condenser"}``). The CPU
runtime is extractive and cannot rewrite questions, so this option is for a real LLM (vLLM).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable
from typing import Protocol

from ragmesh_common.errors import RagmeshError
from ragmesh_common.telemetry import query_hash

from ragmesh_gateway.sessions.condense import condense
from ragmesh_gateway.sessions.ports import QuestionCondenser, Turn

log = logging.getLogger("ragmesh.gateway.sessions")

MAX_CONDENSED_CHARS = 400
MAX_HISTORY_TURNS = 6
MAX_TURN_CHARS = 1000
REFUSAL_SENTINEL = "INSUFFICIENT_EVIDENCE"

SYSTEM_PROMPT = (
    "Rewrite the user's last question so that it can be understood without the conversation: "
    "replace pronouns and references with what they refer to. Keep the language of the question. "
    "Do not answer it. Reply with the rewritten question only, on one line."
)


class _Delta(Protocol):
    text: str


class StreamingChat(Protocol):
    """ragmesh_common.clients.llm.ChatClient, or anything streaming chat deltas the same way."""

    def stream_chat(self, messages: list[dict[str, str]], *, max_tokens: int) -> AsyncIterator[_Delta]: ...


class LlmCondenser(QuestionCondenser):
    def __init__(
        self,
        chat: StreamingChat,
        *,
        timeout_s: float = 5.0,
        on_fallback: Callable[[], None] = lambda: None,
    ) -> None:
        self._chat = chat
        self._timeout_s = timeout_s
        self._on_fallback = on_fallback

    async def condense(self, question: str, history: list[Turn]) -> str:
        question = question.strip()
        if not history:
            return question
        try:
            async with asyncio.timeout(self._timeout_s):
                rewritten = await self._ask(question, history)
        except (RagmeshError, TimeoutError) as exc:
            reason = exc.code.value if isinstance(exc, RagmeshError) else "timeout"
            return self._fallback(question, history, reason)
        if not _usable(rewritten):
            return self._fallback(question, history, "unusable_reply")
        return rewritten.strip()

    async def _ask(self, question: str, history: list[Turn]) -> str:
        messages = [{"role": "system", "content": SYSTEM_PROMPT}]
        messages += [{"role": t.role, "content": t.content[:MAX_TURN_CHARS]}
                     for t in history[-MAX_HISTORY_TURNS:] if t.role in ("user", "assistant")]
        messages.append({"role": "user", "content": question})
        parts: list[str] = []
        stream = self._chat.stream_chat(messages, max_tokens=128)
        try:
            async for delta in stream:
                parts.append(delta.text)
                if sum(map(len, parts)) > MAX_CONDENSED_CHARS:
                    break
        finally:
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        return "".join(parts)

    def _fallback(self, question: str, history: list[Turn], reason: str) -> str:
        self._on_fallback()
        log.warning("condenser fell back to rules",
                    extra={"fields": {"reason": reason, "query_hash": query_hash(question)}})
        return condense(question, history)


def _usable(reply: str) -> bool:
    text = reply.strip()
    return (bool(text) and "\n" not in text and len(text) <= MAX_CONDENSED_CHARS
            and REFUSAL_SENTINEL not in text)
