"""Chat answers as OpenAI objects: the completion, the stream of chunks, and the error body.

Each [S1] marker of the text is a Markdown link to its source, with a ``url_citation`` annotation
over it (``openai_chat.annotations``); the ``ragmesh`` field says what the answer rests on. A
refusal is the refusal sentence, and a withheld answer an assistant message saying why (it could
not be verified, or answer generation is unavailable: ``finish_reason`` ``generation_<code>``),
followed by where to look: ordinary messages that every chat UI shows as they are. Citation urls are absolute on the gateway's public origin (``citations.public_origin``).
"""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator

import msgspec
from litestar.response import ServerSentEventMessage

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.chat.ports import AnswerDone, AnswerFailed, AnswerSources, AnswerToken
from ragmesh_gateway.chat.presenters import cited_security
from ragmesh_gateway.chat.service import GENERATION, ChatSession, CollectedAnswer
from ragmesh_gateway.chat.sse import Heartbeat, with_heartbeat
from ragmesh_gateway.citations import citation_url
from ragmesh_gateway.openai_chat.annotations import CitationLinker, CitedText, SourceLookup, render_whole
from ragmesh_gateway.openai_chat.schemas import (
    AssistantMessage,
    ChatCompletion,
    ChatCompletionChunk,
    Choice,
    ChunkChoice,
    Delta,
    DeltaAnnotation,
    OpenAiError,
    OpenAiErrorDetail,
    RagmeshExtension,
    Usage,
)
from ragmesh_gateway.openai_chat.service import CompletionPlan, words
from ragmesh_gateway.search.presenters import search_hit, single_version
from ragmesh_gateway.search.service import RankedSource, SearchOutcome

WITHHELD = "withheld"
_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                404: "invalid_request_error", 405: "invalid_request_error", 413: "invalid_request_error",
                421: "invalid_request_error", 429: "rate_limit_error"}
_UNKNOWN_FIELD = re.compile(r"unknown field `([^`]+)`")


def source_lookup(outcome: SearchOutcome, origin: str) -> SourceLookup:
    """Source id -> (title, absolute url), over every source the generator was given."""
    by_id = {s.source_id: s.chunk for s in outcome.sources}

    def lookup(source_id: str) -> tuple[str, str] | None:
        chunk = by_id.get(source_id)
        return None if chunk is None else (chunk.title or chunk.source_path, citation_url(chunk, origin))

    return lookup


UNVERIFIED = "The answer was withheld: it could not be verified against the indexed documents."
# What a generation outage (finish_reason generation_<code>, chat.service) says instead: nothing was
# generated, so there was nothing to verify.
OUTAGE = {
    "generation_unavailable": "No answer was written: answer generation is unavailable right now.",
    "generation_deadline_exceeded": "No answer was written: answer generation is unavailable right now "
                                    "(it did not answer in time).",
    "generation_runtime_error": "No answer was written: answer generation is unavailable right now "
                                "(the model runtime failed).",
}


def withheld_text(sources: list[RankedSource], origin: str, reason: str) -> str:
    """The message of a withheld answer: why (``reason``, the answer's ``finish_reason``), then the
    retrieved passages."""
    if reason.startswith(f"{GENERATION}_"):
        lines = [OUTAGE.get(reason, OUTAGE["generation_unavailable"])]
    else:
        lines = [UNVERIFIED]
    if sources:
        lines.append("These passages were found and may answer the question:")
        for source in sources:
            chunk = source.chunk
            where = f" (lines {chunk.line_start}-{chunk.line_end})" if chunk.line_start > 0 else ""
            lines.append(f"- [{source.source_id}] {chunk.title}: {citation_url(chunk, origin)}{where}")
    return "\n".join(lines)


def extension(outcome: SearchOutcome, request_id: str, sources: list[RankedSource], basis: str,
              done: AnswerDone | None, degraded: list[str], origin: str) -> RagmeshExtension:
    return RagmeshExtension(
        request_id=request_id,
        answer_status=done.answer_status if done else "",
        finish_reason=done.finish_reason if done else "error",
        sources=[search_hit(s, origin) for s in sources],
        sources_basis=basis,  # type: ignore[arg-type]
        security=cited_security(sources),
        index_version=single_version(outcome.index_versions),
        index_versions=outcome.index_versions,
        degraded=degraded,
        hint=(done.hint or None) if done else None,
    )


def finish_reason(done: AnswerDone) -> str:
    return "length" if done.finish_reason == "length" else "stop"


def failure(terminal: AnswerFailed) -> RagmeshError:
    code = terminal.code if terminal.code in ErrorCode.__members__ else ErrorCode.INTERNAL.value
    return RagmeshError(ErrorCode(code), terminal.message, {"degraded": list(terminal.degraded)})


def completion(plan: CompletionPlan, collected: CollectedAnswer, request_id: str,
               origin: str) -> ChatCompletion:
    terminal = collected.terminal
    if not isinstance(terminal, AnswerDone):  # generation failed: an OpenAI error answer, not a message
        raise failure(terminal) if isinstance(terminal, AnswerFailed) else RagmeshError(ErrorCode.INTERNAL,
                                                                                         "internal error")
    if terminal.answer_status == WITHHELD:
        text, annotations = withheld_text(collected.cited, origin, terminal.finish_reason), []
    else:
        cited = render_whole(collected.answer, source_lookup(collected.outcome, origin))
        text, annotations = cited.text, cited.annotations
    message = AssistantMessage(content=text, annotations=annotations)
    return ChatCompletion(
        id=f"chatcmpl-{request_id}",
        created=int(time.time()),
        model=plan.model,
        choices=[Choice(message=message, finish_reason=finish_reason(terminal))],  # type: ignore[arg-type]
        usage=Usage(prompt_tokens=plan.prompt_words, completion_tokens=words(text),
                    total_tokens=plan.prompt_words + words(text)),
        ragmesh=extension(collected.outcome, request_id, collected.cited, collected.sources_basis, terminal,
                          list(terminal.degraded), origin),
    )


def _data(payload: msgspec.Struct) -> ServerSentEventMessage:
    return ServerSentEventMessage(data=msgspec.json.encode(payload).decode())


def _content_chunk(head: dict, linker: CitationLinker, cited: CitedText) -> ChatCompletionChunk:
    first = linker.annotations_so_far - len(cited.annotations)
    annotations = [DeltaAnnotation(index=first + i, url_citation=a.url_citation)
                   for i, a in enumerate(cited.annotations)]
    delta = Delta(content=cited.text, annotations=annotations or msgspec.UNSET)
    return ChatCompletionChunk(**head, choices=[ChunkChoice(delta=delta)])


async def chunks(plan: CompletionPlan, session: ChatSession, request_id: str,
                 heartbeat_s: float, origin: str) -> AsyncIterator[ServerSentEventMessage]:
    """The ``chat.completion.chunk`` events: the role, one per verified piece of text as the
    generator releases it (its citations as links, their annotations beside them), the finishing
    chunk (with ``ragmesh``), the usage chunk when asked for, then ``[DONE]``; ``: ping`` while
    waiting."""
    head = {"id": f"chatcmpl-{request_id}", "created": int(time.time()), "model": plan.model}
    yield _data(ChatCompletionChunk(**head, choices=[ChunkChoice(delta=Delta(role="assistant", content=""))]))
    linker = CitationLinker(source_lookup(session.outcome, origin))
    sent: list[str] = []
    sources, basis = [], "cited"
    async for event in with_heartbeat(session.events, heartbeat_s):
        if isinstance(event, Heartbeat):
            yield ServerSentEventMessage(comment="ping", data=None)
        elif isinstance(event, AnswerToken):
            cited = linker.feed(event.text)
            if cited.text:
                sent.append(cited.text)
                yield _data(_content_chunk(head, linker, cited))
        elif isinstance(event, AnswerSources):
            sources, basis = event.sources, event.basis
            if held := linker.finish().text:  # a marker the generator never closed: plain text
                sent.append(held)
                yield _data(ChatCompletionChunk(**head, choices=[ChunkChoice(delta=Delta(content=held))]))
        elif isinstance(event, AnswerDone):
            if event.answer_status == WITHHELD:
                notice = ("\n\n" if sent else "") + withheld_text(sources, origin, event.finish_reason)
                sent.append(notice)
                yield _data(ChatCompletionChunk(**head, choices=[ChunkChoice(delta=Delta(content=notice))]))
            ext = extension(session.outcome, request_id, sources, basis, event, list(event.degraded), origin)
            yield _data(ChatCompletionChunk(
                **head, choices=[ChunkChoice(delta=Delta(), finish_reason=finish_reason(event))],  # type: ignore[arg-type]
                ragmesh=ext))
            if plan.include_usage:
                answer_words = words("".join(sent))
                yield _data(ChatCompletionChunk(**head, choices=[], usage=Usage(
                    prompt_tokens=plan.prompt_words, completion_tokens=answer_words,
                    total_tokens=plan.prompt_words + answer_words)))
        elif isinstance(event, AnswerFailed):
            # What OpenAI and vLLM send when a stream fails: the SDKs raise it as an APIError.
            yield _data(error_body(failure(event), request_id))
    yield ServerSentEventMessage(data="[DONE]")


def _param(error: RagmeshError) -> str | None:
    if "param" in error.details:
        return str(error.details["param"])
    path = str(error.details.get("path", "$"))
    if error.code is ErrorCode.UNKNOWN_FIELD and (match := _UNKNOWN_FIELD.search(error.message)):
        path = f"{path}.{match.group(1)}"
    return path.removeprefix("$").removeprefix(".") or None


def error_body(error: RagmeshError, request_id: str | None) -> OpenAiError:
    status = error.http_status
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return OpenAiError(error=OpenAiErrorDetail(
        message=error.message, type=kind, param=_param(error),
        code=str(error.details.get("openai_code") or error.code.value), request_id=request_id or None,
    ))
