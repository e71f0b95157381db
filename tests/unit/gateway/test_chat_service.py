"""ChatService: one sources and one terminal event on every path, refusal, degradation, cancellation."""

from __future__ import annotations

import asyncio

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import request_id_var

from gateway_fakes import (
    LOCAL,
    FakeSearchBackend,
    RecordingMemory,
    ReversingReranker,
    ScriptedGenerator,
    default_script,
)
from ragmesh_gateway.chat.ports import GeneratedSources, GenerationEnd
from ragmesh_gateway.chat.ports import AnswerDone, AnswerFailed, AnswerSources, AnswerToken
from ragmesh_gateway.chat.service import REFUSAL_TEXT, ChatParams, ChatService
from ragmesh_gateway.search.models import RetrievalQuery, RetrievalResult
from ragmesh_gateway.search.service import SearchService
from ragmesh_gateway.security.injection_guard import InjectionGuard
from ragmesh_gateway.sessions.ports import NoSessionMemory


def chat(generator: ScriptedGenerator, memory=None, backend=None, degraded=None) -> ChatService:
    search = SearchService(backend or FakeSearchBackend(), ReversingReranker(), InjectionGuard())
    return ChatService(
        search,
        generator,
        memory or NoSessionMemory(),
        default_top_k=3,
        max_tokens=256,
        model_hint="hint-model",
        on_degraded=(degraded.append if degraded is not None else lambda component: None),
    )


async def events_of(service: ChatService, params: ChatParams) -> list:
    session = await service.open(params, LOCAL)
    return [event async for event in session.events]


def kinds(events: list) -> list[type]:
    return [type(e) for e in events]


def assert_contract(events: list) -> None:
    """token* -> exactly one sources -> exactly one terminal, last."""
    terminal = [e for e in events if isinstance(e, (AnswerDone, AnswerFailed))]
    assert len(terminal) == 1 and events[-1] is terminal[0], kinds(events)
    sources_at = [i for i, e in enumerate(events) if isinstance(e, AnswerSources)]
    assert sources_at == [len(events) - 2], kinds(events)
    assert all(isinstance(e, AnswerToken) for e in events[:-2]), kinds(events)


class NothingFound(FakeSearchBackend):
    """Retrieval where nothing passed the threshold."""

    async def search(self, query: RetrievalQuery) -> RetrievalResult:
        self.queries.append(query)
        return RetrievalResult(results=[], query_mode="hybrid", filtered_by_threshold=7,
                               hint="no result passed the relevance threshold")


async def test_success_streams_tokens_sources_and_one_done() -> None:
    generator = ScriptedGenerator()
    request_id_var.set("rid-1")
    events = await events_of(chat(generator), ChatParams(question="  what is it? "))

    assert kinds(events) == [AnswerToken, AnswerToken, AnswerSources, AnswerDone]
    done = events[-1]
    assert done.answer_status == "answered" and done.model == "test-model" and done.degraded == []
    assert [s.source_id for s in events[2].sources] == ["S1"] and events[2].basis == "cited"
    sent = generator.requests[0]
    assert sent.question == "what is it?" and sent.request_id == "rid-1" and sent.max_tokens == 256
    assert [s.source_id for s in sent.sources] == ["S1", "S2", "S3"]


async def test_generator_error_mid_stream_sends_what_was_cited_then_one_error() -> None:
    degraded: list[str] = []
    script = [AnswerToken("It is 42 [S2]. "),
              RagmeshError(ErrorCode.RUNTIME_ERROR, "model runtime failed")]
    events = await events_of(chat(ScriptedGenerator(script), degraded=degraded), ChatParams(question="q"))
    assert_contract(events)
    assert kinds(events) == [AnswerToken, AnswerSources, AnswerFailed]
    # The streamed sentence cites S2, so the client gets S2 to read it by.
    assert [s.source_id for s in events[1].sources] == ["S2"] and events[1].basis == "cited"
    assert events[-1] == AnswerFailed("RUNTIME_ERROR", "model runtime failed", ["generation"])
    assert degraded == ["generation"]


@pytest.mark.parametrize("script, reason", [
    # The generation service down (the gateway's call fails).
    ([RagmeshError(ErrorCode.UNAVAILABLE, "generation is unavailable")], "generation_unavailable"),
    # Its model runtime down, stalled or sending garbage (generation says so in its terminal event).
    ([GeneratedSources([]), GenerationEnd(answer_status="withheld", finish_reason="error", error_code="UNAVAILABLE",
                                          error_message="runtime unreachable")], "generation_unavailable"),
    ([GeneratedSources(["S2"]), GenerationEnd(answer_status="withheld", error_code="DEADLINE_EXCEEDED",
                                              error_message="too slow")], "generation_deadline_exceeded"),
    ([GenerationEnd(answer_status="withheld", error_code="RUNTIME_ERROR", error_message="garbage")],
     "generation_runtime_error"),
    ([], "generation_unavailable"),  # the stream just ended: no terminal upstream
])
async def test_generation_down_before_any_text_answers_with_the_retrieval_summary(script, reason) -> None:
    """docs/operations.md: generation (or its model) down gives the retrieval summary instead of an
    answer, flagged ``generation``; no answer text pretends otherwise. Before: an ``error`` event."""
    degraded: list[str] = []
    events = await events_of(chat(ScriptedGenerator(script), degraded=degraded), ChatParams(question="q"))
    assert kinds(events) == [AnswerSources, AnswerDone]
    sources, done = events
    assert sources.basis == "retrieved" and [s.source_id for s in sources.sources] == ["S1", "S2", "S3"]
    assert (done.answer_status, done.finish_reason, done.answer, done.degraded) == (
        "withheld", reason, "", ["generation"])
    assert degraded == ["generation"]


async def test_a_generator_bug_before_any_text_is_still_an_error() -> None:
    script = [GenerationEnd(answer_status="withheld", error_code="INVALID_ARGUMENT", error_message="bad request")]
    events = await events_of(chat(ScriptedGenerator(script)), ChatParams(question="q"))
    assert_contract(events)
    assert events[-1] == AnswerFailed("INVALID_ARGUMENT", "bad request", ["generation"])
    assert events[0].basis == "retrieved"


async def test_unknown_error_code_from_the_generator_is_reported_as_internal() -> None:
    script = [GenerationEnd(error_code="SOMETHING_NEW", error_message="x")]
    events = await events_of(chat(ScriptedGenerator(script)), ChatParams(question="q"))
    assert events[-1] == AnswerFailed("INTERNAL", "x", ["generation"])


async def test_withheld_answer_is_done_with_the_retrieval_summary_and_degraded_generation() -> None:
    degraded: list[str] = []
    script = [
        GeneratedSources([]),
        GenerationEnd(answer_status="withheld", model="m", finish_reason="verification_failed",
                      degraded=["generation"]),
    ]
    events = await events_of(chat(ScriptedGenerator(script), degraded=degraded), ChatParams(question="q"))
    assert kinds(events) == [AnswerSources, AnswerDone]
    assert events[0].basis == "retrieved" and [s.source_id for s in events[0].sources] == ["S1", "S2", "S3"]
    done = events[-1]
    assert (done.answer_status, done.finish_reason, done.degraded) == ("withheld", "verification_failed",
                                                                       ["generation"])
    assert degraded == ["generation"]


async def test_insufficient_evidence_from_the_generator_shows_no_sources() -> None:
    script = [AnswerToken(REFUSAL_TEXT), GeneratedSources([]),
              GenerationEnd(answer_status="insufficient_evidence", finish_reason="refused",
                            answer=REFUSAL_TEXT)]
    events = await events_of(chat(ScriptedGenerator(script)), ChatParams(question="q"))
    assert_contract(events)
    assert events[1].sources == [] and events[-1].answer_status == "insufficient_evidence"


async def test_nothing_retrieved_is_refused_without_calling_the_generator() -> None:
    generator = ScriptedGenerator()
    backend = NothingFound()
    question = ChatParams(question="boiling point of tungsten?")
    events = await events_of(chat(generator, backend=backend), question)
    assert generator.requests == []
    assert kinds(events) == [AnswerToken, AnswerSources, AnswerDone]
    assert events[0].text == REFUSAL_TEXT and events[1].sources == []
    done = events[-1]
    assert (done.answer_status, done.finish_reason) == ("insufficient_evidence", "no_sources")
    assert done.hint == "no result passed the relevance threshold" and done.answer == REFUSAL_TEXT


async def test_stream_without_terminal_still_ends_with_exactly_one_error() -> None:
    events = await events_of(chat(ScriptedGenerator([AnswerToken("a")])), ChatParams(question="q"))
    assert_contract(events)
    assert isinstance(events[-1], AnswerFailed) and events[-1].code == "UNAVAILABLE"


async def test_events_after_the_terminal_are_dropped_and_upstream_closed() -> None:
    script = [*default_script(), AnswerToken("late"), GenerationEnd(answer_status="answered")]
    generator = ScriptedGenerator(script)
    events = await events_of(chat(generator), ChatParams(question="q"))
    assert_contract(events)
    assert isinstance(events[-1], AnswerDone) and "late" not in "".join(
        e.text for e in events if isinstance(e, AnswerToken))
    assert generator.closed.is_set()


async def test_sources_the_generator_invents_are_not_passed_on() -> None:
    script = [GeneratedSources(["S2", "S9"]), GenerationEnd(answer_status="answered")]
    events = await events_of(chat(ScriptedGenerator(script)), ChatParams(question="q"))
    assert [s.source_id for s in events[0].sources] == ["S2"]


async def test_a_crash_inside_the_pipeline_still_ends_with_sources_and_one_internal_error() -> None:
    class Exploding(ScriptedGenerator):
        async def generate(self, request):
            yield AnswerToken("Fine so far [S1]. ")
            raise ValueError("a bug, not a RagmeshError")

    events = await events_of(chat(Exploding()), ChatParams(question="q"))
    assert_contract(events)
    assert events[-1].code == "INTERNAL" and events[-1].message == "internal error"


async def test_consumer_leaving_early_cancels_the_generator() -> None:
    generator = ScriptedGenerator(hang_after=1)
    session = await chat(generator).open(ChatParams(question="q"), LOCAL)
    first = await anext(session.events)
    assert isinstance(first, AnswerToken)
    reader = asyncio.ensure_future(anext(session.events))
    await asyncio.sleep(0)  # the generator is now waiting inside its upstream read
    reader.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reader
    await asyncio.wait_for(generator.closed.wait(), 5)
    assert generator.cancelled


async def test_closing_the_stream_after_the_first_token_closes_the_generator() -> None:
    generator = ScriptedGenerator(hang_after=1)
    session = await chat(generator).open(ChatParams(question="q"), LOCAL)
    assert isinstance(await anext(session.events), AnswerToken)
    await session.events.aclose()
    assert generator.closed.is_set()


async def test_search_failure_happens_before_any_stream_and_is_counted() -> None:
    backend = FakeSearchBackend()
    backend.error = RagmeshError(ErrorCode.UNAVAILABLE, "retrieval is unavailable")
    generator = ScriptedGenerator()
    degraded: list[str] = []
    with pytest.raises(RagmeshError) as err:
        await chat(generator, backend=backend, degraded=degraded).open(ChatParams(question="q"), LOCAL)
    assert err.value.code is ErrorCode.UNAVAILABLE
    assert generator.requests == [] and degraded == ["retrieval"]


async def test_blank_question_is_refused_before_anything_else() -> None:
    backend = FakeSearchBackend()
    with pytest.raises(RagmeshError) as err:
        await chat(ScriptedGenerator(), backend=backend).open(ChatParams(question=" \n\t "), LOCAL)
    assert err.value.code is ErrorCode.QUERY_EMPTY and backend.queries == []


async def test_degraded_search_is_in_the_session_and_in_done() -> None:
    backend = FakeSearchBackend(degraded=["embedding"])
    session = await chat(ScriptedGenerator(), backend=backend).open(ChatParams(question="q"), LOCAL)
    events = [e async for e in session.events]
    assert session.degraded == ["embedding"] and events[-1].degraded == ["embedding"]


async def test_answer_collects_text_sources_and_status() -> None:
    collected = await chat(ScriptedGenerator()).answer(ChatParams(question="q"), LOCAL)
    assert collected.answer == "The answer is 42 [S1]."
    assert [s.source_id for s in collected.cited] == ["S1"] and collected.sources_basis == "cited"
    assert isinstance(collected.terminal, AnswerDone) and collected.model == "test-model"


async def test_answer_reports_failure_in_the_terminal() -> None:
    script = [AnswerToken("x"), RagmeshError(ErrorCode.UNAVAILABLE, "generation is unavailable")]
    collected = await chat(ScriptedGenerator(script)).answer(ChatParams(question="q"), LOCAL)
    assert collected.terminal == AnswerFailed("UNAVAILABLE", "generation is unavailable", ["generation"])
    assert collected.answer == "x" and collected.sources_basis == "retrieved"


async def test_without_memory_no_session_is_issued_and_an_id_is_unknown() -> None:
    service = chat(ScriptedGenerator())
    session = await service.open(ChatParams(question="q"), LOCAL)
    assert session.session_id is None
    with pytest.raises(RagmeshError) as err:
        await service.open(ChatParams(question="q", session_id="rms_madeup"), LOCAL)
    assert err.value.code is ErrorCode.NOT_FOUND


async def test_session_memory_feeds_history_and_records_the_exchange() -> None:
    memory = RecordingMemory()
    generator = ScriptedGenerator()
    service = chat(generator, memory)
    first = await service.answer(ChatParams(question="What is the answer to everything?"), LOCAL)
    assert first.session_id and first.condensed_question is None
    await service.answer(ChatParams(question="Is it prime?", session_id=first.session_id), LOCAL)
    history = generator.requests[1].history
    # Citation markers are dropped from remembered answers; the cited heading is kept.
    assert [(t.role, t.content) for t in history] == [
        ("user", "What is the answer to everything?"),
        ("assistant", "The answer is 42."),
    ]
    assert history[1].cited_headings == ("Guide > Section 6",)  # S1 after the reversing reranker
    assert generator.requests[0].history == []


# --- the request's server span says how the answer ended (issue 23, Build 7) -------------------------

@pytest.fixture
def request_span():
    """A server span bound as the request's, as the gateway's span hook binds it."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import SpanKind

    from ragmesh_common.telemetry import bind_request_span

    span = TracerProvider().get_tracer("test").start_span("POST /api/rag/v1/chat/stream", kind=SpanKind.SERVER)
    bind_request_span(span)
    yield span
    bind_request_span(None)
    span.end()


def span_outcome(span) -> tuple:
    return (span.status.status_code.name, span.status.description, span.attributes.get("ragmesh.degraded"),
            span.attributes.get("error.type"))


async def test_generation_down_marks_the_request_span_degraded(request_span) -> None:
    script = [RagmeshError(ErrorCode.UNAVAILABLE, "generation is unavailable")]
    await events_of(chat(ScriptedGenerator(script)), ChatParams(question="q"))
    assert span_outcome(request_span) == ("ERROR", "degraded: generation", ("generation",), "degraded")


async def test_an_error_event_marks_the_request_span_with_its_code(request_span) -> None:
    script = [AnswerToken("It is 42 [S2]. "), RagmeshError(ErrorCode.RUNTIME_ERROR, "model runtime failed")]
    await events_of(chat(ScriptedGenerator(script)), ChatParams(question="q"))
    assert span_outcome(request_span) == ("ERROR", "RUNTIME_ERROR: model runtime failed", ("generation",),
                                          "RUNTIME_ERROR")


async def test_a_crash_marks_the_request_span_internal(request_span) -> None:
    class Exploding(ScriptedGenerator):
        async def generate(self, request):
            yield AnswerToken("Fine so far [S1]. ")
            raise ValueError("a bug, not a RagmeshError")

    await events_of(chat(Exploding()), ChatParams(question="q"))
    assert span_outcome(request_span) == ("ERROR", "INTERNAL: internal error", None, "INTERNAL")


async def test_degraded_search_marks_the_request_span_even_when_answered(request_span) -> None:
    await events_of(chat(ScriptedGenerator(), backend=FakeSearchBackend(degraded=["embedding"])),
                    ChatParams(question="q"))
    assert span_outcome(request_span) == ("ERROR", "degraded: embedding", ("embedding",), "degraded")


async def test_a_whole_answer_leaves_the_request_span_unset(request_span) -> None:
    await events_of(chat(ScriptedGenerator()), ChatParams(question="q"))
    assert span_outcome(request_span) == ("UNSET", None, None, None)
