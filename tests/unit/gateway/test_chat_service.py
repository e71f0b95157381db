"""ChatService: one terminal event on every path, cancellation reaches the generator."""

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
from ragmesh_gateway.chat.ports import GeneratedSources, GeneratedToken, GenerationEnd, NoSessionMemory
from ragmesh_gateway.chat.service import (
    AnswerDone,
    AnswerFailed,
    AnswerSources,
    AnswerToken,
    ChatParams,
    ChatService,
)
from ragmesh_gateway.search.service import SearchService
from ragmesh_gateway.security.injection_guard import InjectionGuard


def chat(generator: ScriptedGenerator, memory=None, backend=None) -> ChatService:
    search = SearchService(backend or FakeSearchBackend(), ReversingReranker(), InjectionGuard())
    return ChatService(
        search,
        generator,
        memory or NoSessionMemory(),
        default_top_k=3,
        max_tokens=256,
        model_hint="hint-model",
    )


async def events_of(service: ChatService, params: ChatParams) -> list:
    session = await service.open(params, LOCAL)
    return [event async for event in session.events]


def terminals(events: list) -> list:
    return [e for e in events if isinstance(e, (AnswerDone, AnswerFailed))]


async def test_success_streams_tokens_sources_and_one_done() -> None:
    generator = ScriptedGenerator()
    request_id_var.set("rid-1")
    events = await events_of(chat(generator), ChatParams(question="  what is it? "))

    assert [type(e) for e in events] == [AnswerToken, AnswerToken, AnswerSources, AnswerDone]
    done = events[-1]
    assert done.answer_status == "answered" and done.model == "test-model"
    assert [s.source_id for s in events[2].sources] == ["S1"]
    sent = generator.requests[0]
    assert sent.question == "what is it?" and sent.request_id == "rid-1" and sent.max_tokens == 256
    assert [s.source_id for s in sent.sources] == ["S1", "S2", "S3"]


async def test_generator_error_mid_stream_gives_one_error_event_after_the_tokens() -> None:
    script = [GeneratedToken("partial "), RagmeshError(ErrorCode.RUNTIME_ERROR, "model runtime failed")]
    events = await events_of(chat(ScriptedGenerator(script)), ChatParams(question="q"))
    assert [type(e) for e in events] == [AnswerToken, AnswerFailed]
    assert events[-1] == AnswerFailed("RUNTIME_ERROR", "model runtime failed")


async def test_terminal_carrying_an_error_code_becomes_the_error_event() -> None:
    script = [GenerationEnd(error_code="DEADLINE_EXCEEDED", error_message="too slow")]
    events = await events_of(chat(ScriptedGenerator(script)), ChatParams(question="q"))
    assert events == [AnswerFailed("DEADLINE_EXCEEDED", "too slow")]


async def test_unknown_error_code_from_the_generator_is_reported_as_internal() -> None:
    script = [GenerationEnd(error_code="SOMETHING_NEW", error_message="x")]
    events = await events_of(chat(ScriptedGenerator(script)), ChatParams(question="q"))
    assert events == [AnswerFailed("INTERNAL", "x")]


async def test_stream_without_terminal_still_ends_with_exactly_one_error() -> None:
    events = await events_of(chat(ScriptedGenerator([GeneratedToken("a")])), ChatParams(question="q"))
    assert len(terminals(events)) == 1 and isinstance(events[-1], AnswerFailed)
    assert events[-1].code == "UNAVAILABLE"


async def test_events_after_the_terminal_are_dropped_and_upstream_closed() -> None:
    script = [*default_script(), GeneratedToken("late"), GenerationEnd(answer_status="answered")]
    generator = ScriptedGenerator(script)
    events = await events_of(chat(generator), ChatParams(question="q"))
    assert len(terminals(events)) == 1 and isinstance(events[-1], AnswerDone)
    assert generator.closed.is_set()


async def test_sources_the_generator_invents_are_not_passed_on() -> None:
    script = [GeneratedSources(["S2", "S9"]), GenerationEnd(answer_status="answered")]
    events = await events_of(chat(ScriptedGenerator(script)), ChatParams(question="q"))
    assert [s.source_id for s in events[0].sources] == ["S2"]


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


async def test_search_failure_happens_before_any_stream() -> None:
    backend = FakeSearchBackend()
    backend.error = RagmeshError(ErrorCode.UNAVAILABLE, "retrieval is unavailable")
    generator = ScriptedGenerator()
    with pytest.raises(RagmeshError) as err:
        await chat(generator, backend=backend).open(ChatParams(question="q"), LOCAL)
    assert err.value.code is ErrorCode.UNAVAILABLE
    assert generator.requests == []


async def test_answer_collects_text_sources_and_status() -> None:
    collected = await chat(ScriptedGenerator()).answer(ChatParams(question="q"), LOCAL)
    assert collected.answer == "The answer is 42 [S1]."
    assert [s.source_id for s in collected.cited] == ["S1"]
    assert isinstance(collected.terminal, AnswerDone) and collected.model == "test-model"


async def test_answer_reports_failure_in_the_terminal() -> None:
    script = [GeneratedToken("x"), RagmeshError(ErrorCode.UNAVAILABLE, "generation is unavailable")]
    collected = await chat(ScriptedGenerator(script)).answer(ChatParams(question="q"), LOCAL)
    assert collected.terminal == AnswerFailed("UNAVAILABLE", "generation is unavailable")
    assert collected.answer == "x"


async def test_session_memory_feeds_history_and_records_the_exchange() -> None:
    memory = RecordingMemory()
    generator = ScriptedGenerator()
    service = chat(generator, memory)
    await service.answer(ChatParams(question="first?", session_id="s-1"), LOCAL)
    await service.answer(ChatParams(question="second?", session_id="s-1"), LOCAL)
    assert [(t.role, t.content) for t in generator.requests[1].history] == [
        ("user", "first?"),
        ("assistant", "The answer is 42 [S1]."),
    ]
    assert generator.requests[0].history == []
