"""Chat domain events -> DTOs (SSE payloads and the collected answer)."""

from __future__ import annotations

import dataclasses

from ragmesh_gateway.chat.ports import AnswerDone, AnswerEvent, AnswerFailed, AnswerSources, AnswerToken
from ragmesh_gateway.chat.schemas import (
    AnswerResponse,
    ChatDone,
    ChatError,
    ChatMeta,
    ChatRequest,
    ChatSources,
    ChatToken,
)
from ragmesh_gateway.chat.service import ChatParams, ChatSession, CollectedAnswer
from ragmesh_gateway.search.presenters import filters_from, search_hit, security_summary, single_version
from ragmesh_gateway.search.schemas import SecuritySummary
from ragmesh_gateway.search.service import GuardReport, RankedSource


def chat_params(request: ChatRequest) -> ChatParams:
    assert isinstance(request.query, str)  # ChatRequest.__post_init__: query, or its alias question
    return ChatParams(
        question=request.query,
        top_k=request.top_k,
        filters=filters_from(request.filters),
        session_id=request.session_id,
        max_tokens=request.max_tokens,
    )


def chat_meta(session: ChatSession, request_id: str) -> ChatMeta:
    versions = session.outcome.index_versions
    return ChatMeta(
        request_id=request_id,
        index_version=single_version(versions),
        index_versions=versions,
        model=session.model,
        session_id=session.session_id,
        degraded=list(session.degraded),
        condensed_question=session.condensed_question,
    )


def cited_security(cited: list[RankedSource]) -> SecuritySummary:
    """The summary of what the visitor is shown: findings in the sources sent with the answer,
    not in candidates that were retrieved but not cited."""
    return security_summary(GuardReport.of((s.source_id, s.guarded) for s in cited))


def event_payload(
    event: AnswerEvent, session: ChatSession, request_id: str, origin: str = ""
) -> tuple[str, ChatToken | ChatSources | ChatDone | ChatError]:
    """(SSE event name, payload)."""
    if isinstance(event, AnswerToken):
        return "token", ChatToken(text=event.text)
    if isinstance(event, AnswerSources):
        return "sources", ChatSources(
            sources=[search_hit(s, origin) for s in event.sources],
            security=cited_security(event.sources),
            basis=event.basis,  # type: ignore[arg-type]
        )
    if isinstance(event, AnswerDone):
        return "done", ChatDone(**_values(event, _DONE_FIELDS), hint=event.hint or None)
    return "error", chat_error(event, request_id)


def _shown_as_is(event: type, dto: type) -> tuple[str, ...]:
    """The event's fields that the DTO shows as they are, by name; ``hint`` and ``request_id`` it
    shows otherwise."""
    names = {f.name for f in dataclasses.fields(event)}
    return tuple(n for n in dto.__struct_fields__ if n in names and n not in {"hint", "request_id"})


_DONE_FIELDS = _shown_as_is(AnswerDone, ChatDone)
_ERROR_FIELDS = _shown_as_is(AnswerFailed, ChatError)


def _values(event: AnswerDone | AnswerFailed, names: tuple[str, ...]) -> dict:
    return {n: list(v) if isinstance(v := getattr(event, n), list) else v for n in names}


def chat_error(event: AnswerFailed, request_id: str) -> ChatError:
    return ChatError(**_values(event, _ERROR_FIELDS), request_id=request_id)


def answer_response(collected: CollectedAnswer, request_id: str, origin: str = "") -> AnswerResponse:
    outcome = collected.outcome
    terminal = collected.terminal
    versions = outcome.index_versions
    done = terminal if isinstance(terminal, AnswerDone) else None
    failed = terminal if isinstance(terminal, AnswerFailed) else None
    return AnswerResponse(
        request_id=request_id,
        status="done" if done else "error",
        answer=collected.answer,
        answer_status=done.answer_status if done else "",
        model=collected.model,
        finish_reason=done.finish_reason if done else "",
        degraded=list(terminal.degraded) if terminal else list(outcome.degraded),
        index_version=single_version(versions),
        index_versions=versions,
        session_id=collected.session_id,
        sources=[search_hit(s, origin) for s in collected.cited],
        security=cited_security(collected.cited),
        error=chat_error(failed, request_id) if failed else None,
        sources_basis=collected.sources_basis,  # type: ignore[arg-type]
        condensed_question=collected.condensed_question,
        hint=(done.hint or None) if done else None,
    )
