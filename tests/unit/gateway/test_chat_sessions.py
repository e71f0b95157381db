"""Chat with session memory: ids issued by the server, owners enforced, follow-ups condensed,
and a memory store that is down costs the history, never the answer."""

from __future__ import annotations

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError

from gateway_fakes import LOCAL, FakeSearchBackend, RecordingMemory, ReversingReranker, ScriptedGenerator
from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.chat.ports import AnswerDone
from ragmesh_gateway.chat.service import ChatParams, ChatService
from ragmesh_gateway.search.service import SearchService
from ragmesh_gateway.security.injection_guard import InjectionGuard
from ragmesh_gateway.sessions.condense import SEPARATOR, RuleCondenser

OTHER = Caller("someone-else", readable_corpora=LOCAL.readable_corpora)


def service(memory: RecordingMemory, backend: FakeSearchBackend, generator: ScriptedGenerator,
            degraded: list[str] | None = None) -> ChatService:
    return ChatService(
        SearchService(backend, ReversingReranker(), InjectionGuard()),
        generator,
        memory,
        condenser=RuleCondenser(),
        default_top_k=2,
        on_degraded=(degraded.append if degraded is not None else lambda c: None),
    )


async def test_follow_up_is_condensed_for_search_and_generation() -> None:
    memory, backend, generator = RecordingMemory(), FakeSearchBackend(), ScriptedGenerator()
    chat = service(memory, backend, generator)
    first = await chat.answer(ChatParams(question="What is the default queue depth of the scheduler?"), LOCAL)
    follow_up = ChatParams(question="And how do I change it?", session_id=first.session_id)
    follow = await chat.answer(follow_up, LOCAL)

    assert follow.session_id == first.session_id
    condensed = follow.condensed_question
    assert condensed and condensed.endswith(SEPARATOR + "And how do I change it?")
    assert "queue" in condensed and "scheduler" in condensed
    assert backend.queries[-1].query == condensed  # what was searched is what the client is told
    assert generator.requests[-1].question == condensed
    # The exchange is remembered in its standalone form, so the next follow-up keeps the topic.
    assert memory.turns[first.session_id][2].content == condensed


async def test_a_session_cannot_be_read_by_another_caller() -> None:
    memory = RecordingMemory()
    chat = service(memory, FakeSearchBackend(), ScriptedGenerator())
    first = await chat.answer(ChatParams(question="What is the answer?"), LOCAL)
    with pytest.raises(RagmeshError) as err:
        await chat.open(ChatParams(question="and its source?", session_id=first.session_id), OTHER)
    assert err.value.code is ErrorCode.NOT_FOUND and err.value.http_status == 404
    assert len(memory.turns[first.session_id]) == 2  # nothing was added by the stranger


async def test_unknown_session_id_is_an_error_before_any_search() -> None:
    backend = FakeSearchBackend()
    chat = service(RecordingMemory(), backend, ScriptedGenerator())
    with pytest.raises(RagmeshError) as err:
        await chat.open(ChatParams(question="q", session_id="rms_guessed"), LOCAL)
    assert err.value.code is ErrorCode.NOT_FOUND and backend.queries == []


async def test_memory_down_answers_without_history_and_says_so() -> None:
    memory = RecordingMemory()
    memory.error = RagmeshError(ErrorCode.UNAVAILABLE, "session memory read: ConnectionError")
    degraded: list[str] = []
    generator = ScriptedGenerator()
    chat = service(memory, FakeSearchBackend(), generator, degraded)
    collected = await chat.answer(ChatParams(question="And how do I change it?", session_id="rms_x"), LOCAL)
    assert isinstance(collected.terminal, AnswerDone) and collected.terminal.answer_status == "answered"
    assert collected.terminal.degraded == ["session_memory"] and degraded == ["session_memory"]
    assert generator.requests[0].history == [] and collected.condensed_question is None


async def test_memory_down_for_a_new_question_issues_no_session() -> None:
    memory = RecordingMemory()
    memory.error = RagmeshError(ErrorCode.UNAVAILABLE, "down")
    chat = service(memory, FakeSearchBackend(), ScriptedGenerator())
    session = await chat.open(ChatParams(question="q"), LOCAL)
    assert session.session_id is None and session.degraded == ["session_memory"]
    events = [e async for e in session.events]
    assert events[-1].degraded == ["session_memory"]
