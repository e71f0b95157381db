"""Chat domain events -> DTOs (SSE payloads and the collected answer)."""

from __future__ import annotations

from ragmesh_gateway.chat.schemas import (
    AnswerResponse,
    ChatDone,
    ChatError,
    ChatMeta,
    ChatRequest,
    ChatSources,
    ChatToken,
)
from ragmesh_gateway.chat.service import (
    AnswerDone,
    AnswerEvent,
    AnswerFailed,
    AnswerSources,
    AnswerToken,
    ChatParams,
    ChatSession,
    CollectedAnswer,
)
from ragmesh_gateway.search.presenters import filters_from, search_hit, security_summary, single_version
from ragmesh_gateway.search.service import GuardReport, RankedSource
from ragmesh_gateway.security.findings import SecuritySummary


def chat_params(request: ChatRequest) -> ChatParams:
    return ChatParams(
        question=request.question,
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


def cited_security(cited: list[RankedSource]):
    """The summary of what the visitor is shown: findings in the sources sent with the answer,
    not in candidates that were retrieved but not cited."""
    summary = SecuritySummary.of(result for source in cited for result in source.guarded.results)
    flagged = [s.source_id for s in cited if any(r.findings for r in s.guarded.results)]
    return security_summary(GuardReport(summary, flagged))


def event_payload(
    event: AnswerEvent, session: ChatSession, request_id: str
) -> tuple[str, ChatToken | ChatSources | ChatDone | ChatError]:
    """(SSE event name, payload)."""
    if isinstance(event, AnswerToken):
        return "token", ChatToken(text=event.text)
    if isinstance(event, AnswerSources):
        return "sources", ChatSources(
            sources=[search_hit(s) for s in event.sources],
            security=cited_security(event.sources),
            basis=event.basis,  # type: ignore[arg-type]
        )
    if isinstance(event, AnswerDone):
        return "done", ChatDone(
            answer_status=event.answer_status,
            model=event.model,
            finish_reason=event.finish_reason,
            degraded=list(event.degraded),
            hint=event.hint or None,
        )
    return "error", ChatError(
        code=event.code, message=event.message, request_id=request_id, degraded=list(event.degraded)
    )


def answer_response(collected: CollectedAnswer, request_id: str) -> AnswerResponse:
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
        sources=[search_hit(s) for s in collected.cited],
        security=cited_security(collected.cited),
        error=(
            ChatError(
                code=failed.code,
                message=failed.message,
                request_id=request_id,
                degraded=list(failed.degraded),
            )
            if failed
            else None
        ),
        sources_basis=collected.sources_basis,  # type: ignore[arg-type]
        condensed_question=collected.condensed_question,
        hint=(done.hint or None) if done else None,
    )
