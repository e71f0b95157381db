"""Grounded chat: session, search, then the generator's answer with exactly one terminal event.

``open`` does everything that can fail because of the request before anything is streamed (bad
input, an unknown session id, a dead retrieval service): those are ordinary HTTP errors. After
that, every path through ``events`` yields ``AnswerToken``*, then exactly one ``AnswerSources``,
then exactly one ``AnswerDone`` or ``AnswerFailed`` — except when the consumer goes away: then the
upstream call is cancelled and nothing more is sent.

Refusal: when no source passes retrieval's threshold the generator is not called at all; the
answer is the refusal sentence with ``insufficient_evidence`` and retrieval's hint.

Degradation, in order: the generator (down, stalled or sending garbage before any text, or its
answer withheld: the client gets the retrieval summary instead of an answer — every retrieved
source, ``basis: "retrieved"``, no answer text, ``done`` with ``withheld`` — and ``degraded`` holds
``generation``; a failure after part of the answer was sent ends in ``error``, with the sources that
part cites), the reranker and the embedding (fused or keyword-only order, flagged by
search/retrieval), session memory (answered without history). Each is counted in
``ragmesh_degraded_total``. Retrieval itself (Qdrant) down is the end of the line: an UNAVAILABLE
error before the stream.

The request's server span ends as the stream does: ERROR with the code of an ``error`` event, or
with the ``degraded`` flags of a degraded answer (``ragmesh_common.telemetry.mark_request_*``).
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from ragmesh_common.answer_defaults import ANSWER_SOURCES
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import (
    Stopwatch,
    mark_request_degraded,
    mark_request_failed,
    query_hash,
    request_id_var,
)

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.chat.conversation import Conversation, Conversations
from ragmesh_gateway.chat.ports import (
    AnswerDone,
    AnswerEvent,
    AnswerFailed,
    AnswerGenerator,
    AnswerSources,
    AnswerToken,
    GeneratedSources,
    GenerationEnd,
    GenerationRequest,
    SourceRef,
)
from ragmesh_gateway.search.models import Filters
from ragmesh_gateway.search.service import RankedSource, SearchOutcome, SearchParams, SearchService
from ragmesh_gateway.sessions.ports import QuestionCondenser, SessionMemory, StandaloneQuestions, Turn

log = logging.getLogger("ragmesh.gateway.chat")

GENERATION = "generation"
RETRIEVAL = "retrieval"
#: The answer when nothing was retrieved; the generation service says the same when it refuses.
REFUSAL_TEXT = "I can't answer that from the indexed documents."
_CITED = re.compile(r"\[\s*(S\d+(?:\s*[,;]\s*S\d+)*)\s*\]")
#: Generator failures that are an outage of generation or its model (down, stalled, garbage): before
#: any text they leave the retrieval summary as the answer. Anything else is a bug: an ``error``.
_GENERATION_OUTAGE = frozenset({ErrorCode.UNAVAILABLE, ErrorCode.DEADLINE_EXCEEDED, ErrorCode.RUNTIME_ERROR})


@dataclass(frozen=True, slots=True)
class ChatParams:
    question: str
    top_k: int | None = None
    filters: Filters = Filters()
    session_id: str | None = None
    max_tokens: int | None = None
    # The conversation so far when the client keeps it (OpenAI messages); None: session memory.
    history: tuple[Turn, ...] | None = None


@dataclass(slots=True)
class ChatSession:
    outcome: SearchOutcome
    model: str
    session_id: str | None
    events: AsyncIterator[AnswerEvent]
    condensed_question: str | None = None
    degraded: list[str] = field(default_factory=list)  # known before the stream: search + memory


@dataclass(slots=True)
class CollectedAnswer:
    outcome: SearchOutcome
    model: str
    session_id: str | None
    answer: str = ""
    cited: list[RankedSource] = field(default_factory=list)
    sources_basis: str = "cited"
    condensed_question: str | None = None
    terminal: AnswerDone | AnswerFailed | None = None


class ChatService:
    def __init__(
        self,
        search: SearchService,
        generator: AnswerGenerator,
        memory: SessionMemory,
        *,
        condenser: QuestionCondenser | None = None,
        default_top_k: int = ANSWER_SOURCES,
        max_tokens: int = 512,
        include_content: bool = True,
        model_hint: str = "",
        on_degraded: Callable[[str], None] = lambda component: None,
    ) -> None:
        self._search = search
        self._generator = generator
        self._conversations = Conversations(
            memory, condenser or StandaloneQuestions(), on_degraded=on_degraded
        )
        self._default_top_k = default_top_k
        self._max_tokens = max_tokens
        self._include_content = include_content
        self._model_hint = model_hint
        self._on_degraded = on_degraded

    async def open(self, params: ChatParams, caller: Caller) -> ChatSession:
        question = params.question.strip()
        if not question:
            raise RagmeshError(ErrorCode.QUERY_EMPTY, "question is empty")
        history = list(params.history) if params.history is not None else None
        conversation = await self._conversations.open(question, params.session_id, caller, history)
        try:
            outcome = await self._search.search(
                SearchParams(
                    query=conversation.standalone,
                    top_k=params.top_k or self._default_top_k,
                    filters=params.filters,
                    include_content=self._include_content,
                ),
                caller,
            )
        except RagmeshError as exc:
            if exc.code in (ErrorCode.UNAVAILABLE, ErrorCode.DEADLINE_EXCEEDED):
                self._on_degraded(RETRIEVAL)  # the last step of the chain: nothing left to answer from
            raise
        request = GenerationRequest(
            question=conversation.standalone,
            sources=[SourceRef(source_id=s.source_id, chunk=s.chunk) for s in outcome.sources],
            history=conversation.history,
            request_id=request_id_var.get(),
            max_tokens=params.max_tokens or self._max_tokens,
        )
        events = self._refusal(outcome, conversation) if not outcome.sources else \
            self._events(request, outcome, conversation)
        return ChatSession(
            outcome=outcome,
            model=self._model_hint,
            session_id=conversation.session_id,
            events=_one_terminal(events),
            condensed_question=conversation.condensed_question,
            degraded=_merge(outcome.degraded, conversation.degraded),
        )

    async def answer(self, params: ChatParams, caller: Caller) -> CollectedAnswer:
        """The whole answer at once, for callers that cannot read a stream (MCP, POST /chat)."""
        session = await self.open(params, caller)
        collected = CollectedAnswer(
            outcome=session.outcome,
            model=session.model,
            session_id=session.session_id,
            condensed_question=session.condensed_question,
        )
        parts: list[str] = []
        async for event in session.events:
            if isinstance(event, AnswerToken):
                parts.append(event.text)
            elif isinstance(event, AnswerSources):
                collected.cited, collected.sources_basis = event.sources, event.basis
            else:
                collected.terminal = event
        collected.answer = "".join(parts)
        if isinstance(collected.terminal, AnswerDone):
            collected.model = collected.terminal.model or collected.model
            collected.answer = collected.terminal.answer or collected.answer
        return collected

    async def _refusal(
        self, outcome: SearchOutcome, conversation: Conversation
    ) -> AsyncIterator[AnswerEvent]:
        """Nothing passed retrieval: refuse without asking the generator (no answer from memory)."""
        yield AnswerToken(REFUSAL_TEXT)
        yield AnswerSources([])
        await self._conversations.record(conversation, REFUSAL_TEXT, [])
        log.info("chat", extra={"fields": {"query_hash": query_hash(conversation.standalone), "sources": 0,
                                           "status": "insufficient_evidence"}})
        yield AnswerDone(
            answer_status="insufficient_evidence",
            model="",
            finish_reason="no_sources",
            degraded=_merge(outcome.degraded, conversation.degraded),
            answer=REFUSAL_TEXT,
            hint=outcome.retrieval.hint,
        )

    async def _events(
        self, request: GenerationRequest, outcome: SearchOutcome, conversation: Conversation
    ) -> AsyncIterator[AnswerEvent]:
        clock = Stopwatch()
        parts: list[str] = []
        cited_ids: list[str] | None = None  # held back until the terminal decides what to show
        end: GenerationEnd | None = None
        failure: RagmeshError | None = None
        fields = {"query_hash": query_hash(request.question), "sources": len(request.sources)}
        stream = self._generator.generate(request)
        try:
            async for event in stream:
                if isinstance(event, AnswerToken):
                    if event.text:
                        parts.append(event.text)
                        yield event
                elif isinstance(event, GeneratedSources):
                    cited_ids = list(event.source_ids)
                elif isinstance(event, GenerationEnd):
                    end = event
                    break
        except RagmeshError as exc:
            failure = exc
        finally:
            # Closing the upstream iterator cancels the gRPC call (client went away, or we stopped early).
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        streamed = "".join(parts)
        if end is not None and end.error_code:
            code = end.error_code if end.error_code in ErrorCode.__members__ else ErrorCode.INTERNAL.value
            failure = RagmeshError(ErrorCode(code), end.error_message or "answer generation failed")
        elif end is None and failure is None:
            failure = RagmeshError(
                ErrorCode.UNAVAILABLE, "the generator stopped without finishing the answer"
            )
        if failure is not None and not streamed and failure.code in _GENERATION_OUTAGE:
            # Nothing was answered: the retrieval summary is the answer, said to be one.
            end = GenerationEnd(answer_status="withheld", model=end.model if end else "",
                                finish_reason=_outage_reason(failure), degraded=[GENERATION])
            cited_ids = []
            log.warning("generation unavailable; answered with the retrieval summary",
                        extra={"fields": {**fields, "code": failure.code.value}})
            failure = None
        if failure is not None:
            self._on_degraded(GENERATION)
            yield self._sources(outcome, cited_ids, streamed, show_summary=True)
            log.warning(
                "chat failed", extra={"fields": {**fields, "code": failure.code.value, "ms": clock.ms}}
            )
            yield AnswerFailed(failure.code.value, failure.message,
                               _merge(outcome.degraded, conversation.degraded, [GENERATION]))
            return
        assert end is not None
        answer = end.answer or streamed
        withheld = end.answer_status == "withheld"
        if withheld:
            self._on_degraded(GENERATION)
        sources = self._sources(outcome, cited_ids, streamed, show_summary=withheld)
        yield sources
        cited_headings = [_heading(s) for s in sources.sources] if sources.basis == "cited" else []
        await self._conversations.record(conversation, answer, cited_headings)
        log.info("chat", extra={"fields": {**fields, "status": end.answer_status, "ms": clock.ms}})
        yield AnswerDone(
            answer_status=end.answer_status,
            model=end.model or self._model_hint,
            finish_reason=end.finish_reason,
            degraded=_merge(outcome.degraded, conversation.degraded, end.degraded,
                            [GENERATION] if withheld else []),
            answer=answer,
        )

    @staticmethod
    def _sources(
        outcome: SearchOutcome, cited_ids: list[str] | None, streamed: str, *, show_summary: bool
    ) -> AnswerSources:
        """What the client needs to read the answer: the cited sources; or, when nothing was
        answered and ``show_summary``, the retrieval summary instead."""
        by_id = {s.source_id: s for s in outcome.sources}
        if cited_ids is None:  # the generator never said: take the citations in the streamed text
            cited_ids = [sid for group in _CITED.findall(streamed) for sid in re.findall(r"S\d+", group)]
        cited = [by_id[sid] for sid in dict.fromkeys(cited_ids) if sid in by_id]
        if cited or not show_summary:
            return AnswerSources(cited)
        return AnswerSources(list(outcome.sources), basis="retrieved")


async def _one_terminal(events: AsyncIterator[AnswerEvent]) -> AsyncIterator[AnswerEvent]:
    """The last line of the stream contract: a bug anywhere above still ends the stream with one
    ``sources`` and one terminal event (INTERNAL), and nothing follows a terminal event."""
    sources_sent = False
    async with contextlib.aclosing(events):
        try:
            async for event in events:
                if isinstance(event, (AnswerDone, AnswerFailed)):
                    _mark_outcome(event)
                yield event
                sources_sent = sources_sent or isinstance(event, AnswerSources)
                if isinstance(event, (AnswerDone, AnswerFailed)):
                    return
        except Exception:
            log.exception("chat stream crashed")
        if not sources_sent:
            yield AnswerSources([])
        crashed = AnswerFailed(ErrorCode.INTERNAL.value, "internal error")
        _mark_outcome(crashed)
        yield crashed


def _mark_outcome(terminal: AnswerDone | AnswerFailed) -> None:
    """The request's server span says how the answer ended (before the client reads it)."""
    if isinstance(terminal, AnswerFailed):
        mark_request_failed(terminal.code, terminal.message)
    mark_request_degraded(terminal.degraded)


def _outage_reason(failure: RagmeshError) -> str:
    """``finish_reason`` of an answer generation could not give: ``generation_unavailable``,
    ``generation_deadline_exceeded`` or ``generation_runtime_error``."""
    return f"{GENERATION}_{failure.code.value.lower()}"


def _heading(source: RankedSource) -> str:
    chunk = source.chunk
    return " > ".join(chunk.heading_path) or chunk.title


def _merge(*groups: list[str]) -> list[str]:
    return list(dict.fromkeys(item for group in groups for item in group))
