"""Grounded chat: search, then stream the generator's answer with exactly one terminal event.

``open`` runs the search before anything is streamed, so a bad request or a dead retrieval
service is an ordinary HTTP error. After that every path through ``events`` ends in exactly one
``AnswerDone`` or ``AnswerFailed``, except when the consumer goes away: then the upstream call
is cancelled and nothing more is sent.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import Stopwatch, query_hash, request_id_var

from ragmesh_gateway.access import Caller
from ragmesh_gateway.chat.ports import (
    AnswerGenerator,
    GeneratedSources,
    GeneratedToken,
    GenerationEnd,
    GenerationRequest,
    SessionMemory,
    SourceRef,
    Turn,
)
from ragmesh_gateway.search.models import Filters
from ragmesh_gateway.search.service import RankedSource, SearchOutcome, SearchParams, SearchService

log = logging.getLogger("ragmesh.gateway.chat")


@dataclass(frozen=True, slots=True)
class ChatParams:
    question: str
    top_k: int | None = None
    filters: Filters = Filters()
    session_id: str | None = None
    max_tokens: int | None = None


@dataclass(frozen=True, slots=True)
class AnswerToken:
    text: str


@dataclass(frozen=True, slots=True)
class AnswerSources:
    sources: list[RankedSource]


@dataclass(frozen=True, slots=True)
class AnswerDone:
    answer_status: str
    model: str
    finish_reason: str
    degraded: list[str]
    answer: str


@dataclass(frozen=True, slots=True)
class AnswerFailed:
    code: str
    message: str


AnswerEvent = AnswerToken | AnswerSources | AnswerDone | AnswerFailed


@dataclass(slots=True)
class ChatSession:
    outcome: SearchOutcome
    model: str
    session_id: str | None
    events: AsyncIterator[AnswerEvent]


@dataclass(slots=True)
class CollectedAnswer:
    outcome: SearchOutcome
    model: str
    session_id: str | None
    answer: str = ""
    cited: list[RankedSource] = field(default_factory=list)
    terminal: AnswerDone | AnswerFailed | None = None


class ChatService:
    def __init__(
        self,
        search: SearchService,
        generator: AnswerGenerator,
        memory: SessionMemory,
        *,
        default_top_k: int = 5,
        max_tokens: int = 512,
        include_content: bool = True,
        model_hint: str = "",
    ) -> None:
        self._search = search
        self._generator = generator
        self._memory = memory
        self._default_top_k = default_top_k
        self._max_tokens = max_tokens
        self._include_content = include_content
        self._model_hint = model_hint

    async def open(self, params: ChatParams, caller: Caller) -> ChatSession:
        question = params.question.strip()
        if not question:
            raise RagmeshError(ErrorCode.QUERY_EMPTY, "question is empty")
        outcome = await self._search.search(
            SearchParams(
                query=question,
                top_k=params.top_k or self._default_top_k,
                filters=params.filters,
                include_content=self._include_content,
            ),
            caller,
        )
        history = await self._memory.history(params.session_id) if params.session_id else []
        request = GenerationRequest(
            question=question,
            sources=[SourceRef(source_id=s.source_id, chunk=s.chunk) for s in outcome.sources],
            history=history,
            request_id=request_id_var.get(),
            max_tokens=params.max_tokens or self._max_tokens,
        )
        return ChatSession(
            outcome=outcome,
            model=self._model_hint,
            session_id=params.session_id,
            events=self._events(request, outcome, params.session_id),
        )

    async def answer(self, params: ChatParams, caller: Caller) -> CollectedAnswer:
        """The whole answer at once, for callers that cannot read a stream (MCP, POST /chat)."""
        session = await self.open(params, caller)
        collected = CollectedAnswer(
            outcome=session.outcome, model=session.model, session_id=session.session_id
        )
        parts: list[str] = []
        async for event in session.events:
            if isinstance(event, AnswerToken):
                parts.append(event.text)
            elif isinstance(event, AnswerSources):
                collected.cited = event.sources
            else:
                collected.terminal = event
        collected.answer = "".join(parts)
        if isinstance(collected.terminal, AnswerDone):
            collected.model = collected.terminal.model or collected.model
            collected.answer = collected.terminal.answer or collected.answer
        return collected

    async def _events(
        self, request: GenerationRequest, outcome: SearchOutcome, session_id: str | None
    ) -> AsyncIterator[AnswerEvent]:
        by_id = {s.source_id: s for s in outcome.sources}
        clock = Stopwatch()
        parts: list[str] = []
        fields = {"query_hash": query_hash(request.question), "sources": len(request.sources)}
        stream = self._generator.generate(request)
        try:
            async for event in stream:
                if isinstance(event, GeneratedToken):
                    if event.text:
                        parts.append(event.text)
                        yield AnswerToken(event.text)
                elif isinstance(event, GeneratedSources):
                    yield AnswerSources([by_id[sid] for sid in event.source_ids if sid in by_id])
                elif isinstance(event, GenerationEnd):
                    yield await self._terminal(event, outcome, request, session_id, "".join(parts))
                    log.info(
                        "chat",
                        extra={
                            "fields": {
                                **fields,
                                "status": event.answer_status or event.error_code,
                                "ms": clock.ms,
                            }
                        },
                    )
                    return
            yield AnswerFailed(
                ErrorCode.UNAVAILABLE.value, "the generator stopped without finishing the answer"
            )
        except RagmeshError as exc:
            log.warning("chat failed", extra={"fields": {**fields, "code": exc.code.value, "ms": clock.ms}})
            yield AnswerFailed(exc.code.value, exc.message)
        finally:
            # Closing the upstream iterator cancels the gRPC call (client went away, or we stopped early).
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()

    async def _terminal(
        self,
        end: GenerationEnd,
        outcome: SearchOutcome,
        request: GenerationRequest,
        session_id: str | None,
        streamed: str,
    ) -> AnswerDone | AnswerFailed:
        if end.error_code:
            code = end.error_code if end.error_code in ErrorCode.__members__ else ErrorCode.INTERNAL.value
            return AnswerFailed(code, end.error_message or "answer generation failed")
        answer = end.answer or streamed
        if session_id:
            await self._memory.remember(
                session_id, [Turn("user", request.question), Turn("assistant", answer)]
            )
        degraded = list(dict.fromkeys([*outcome.degraded, *end.degraded]))
        return AnswerDone(
            answer_status=end.answer_status,
            model=end.model or self._model_hint,
            finish_reason=end.finish_reason,
            degraded=degraded,
            answer=answer,
        )
