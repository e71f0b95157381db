"""Grounded answers: build the prompt, stream the model, verify, release only what verifies.

Streaming vs verification. Model output is buffered up to the end of each *cited segment* (a run
of sentences closed by a sentence that carries ``[S#]``, see ``segments``); each segment is
checked (``citations``) and, if it passes, streamed at once. Time to first token is therefore
the time to the first cited sentence, not to the whole answer, and no sentence leaves this
service before the citation covering it has arrived and checked out. What happens when a check
fails depends on whether anything was sent yet:

- nothing sent: one regeneration with a stricter instruction; if that fails too, the answer is
  withheld (``withheld``, degraded ``generation``) and the gateway shows the retrieval summary;
- something sent: the answer stops at the last verified segment (``verification_truncated``);
  verified sentences already on the wire are not taken back, and nothing unverified follows them.

An uncited tail at the end (``Hope this helps!``) counts as a failed check: it is never sent.
A model output that contains ``INSUFFICIENT_EVIDENCE`` before anything was sent becomes
``insufficient_evidence`` with a plain refusal sentence as the streamed text; after verified
text it simply ends the answer.

Events: AnswerToken*, then exactly one CitedSources (the sources the sent text cites, in order of
first citation; empty when nothing was answered; an ``answered`` answer always cites at least
one source, because uncited text is never sent), then exactly one AnswerDone. Runtime failures
(UNAVAILABLE, RUNTIME_ERROR, DEADLINE_EXCEEDED, stalls past the idle timeout) end in a withheld
AnswerDone with the error code, never an exception mid-stream. Only bad input raises, before
the first event.

finish_reason: the model's own ("stop", "length") when the answer ran to its end, else
"refused", "no_sources", "verification_truncated", "verification_failed" or "error".
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import re
import time
from dataclasses import dataclass, field, replace
from typing import AsyncIterator

from opentelemetry import trace

from ragmesh_common import metrics as shared_metrics
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import query_hash, tracer

from ragmesh_generation.budget import PromptBudget, cut_source
from ragmesh_generation.citations import PROBLEM_TEXT, CitationChecker
from ragmesh_generation.domain import (
    AnswerDone, AnswerEvent, AnswerRequest, AnswerStatus, AnswerToken, CitedSources, HistoryTurn, PromptFit,
)
from ragmesh_generation.metrics import ANSWERS, ATTRIBUTIONS, TTFT, VERIFICATION_FAILURES
from ragmesh_generation.ports import ChatModel
from ragmesh_generation.prompt import INSUFFICIENT_EVIDENCE, REFUSAL_TEXT, build_messages
from ragmesh_generation.segments import SegmentBuffer
from ragmesh_generation.support import attribute
from ragmesh_generation.settings import GenerationSettings

log = logging.getLogger("ragmesh.generation")

_SOURCE_ID = re.compile(r"S[1-9]\d{0,3}")
# Kept back from the caller's deadline so the terminal event still reaches it.
DEADLINE_MARGIN_S = 0.25
# Characters of streamed text per token of max_tokens past which the runtime is not stopping
# (the longest tokens of BPE vocabularies are ~16 characters).
MAX_CHARS_PER_TOKEN = 16


class _Outcome(enum.Enum):
    VERIFIED = "verified"
    REFUSED = "refused"
    UNVERIFIED = "unverified"
    FAILED = "failed"


@dataclass
class _Attempt:
    number: int
    outcome: _Outcome = _Outcome.FAILED
    problems: list[str] = field(default_factory=list)
    error: RagmeshError | None = None
    model: str = ""
    finish_reason: str = ""
    repaired: bool = False  # its tail was cited by attribution

    def fail(self, error: RagmeshError) -> None:
        self.outcome, self.error = _Outcome.FAILED, error


@dataclass
class _Sent:
    """What has gone out to the caller so far, across attempts."""

    parts: list[str] = field(default_factory=list)
    cited: dict[str, None] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "".join(self.parts)


class GroundedAnswerer:
    def __init__(self, model: ChatModel, settings: GenerationSettings,
                 span_tracer: trace.Tracer | None = None) -> None:
        self._model = model
        self._settings = settings
        self._tracer = span_tracer or tracer("ragmesh.generation")
        self._budget = PromptBudget(model, max_context_tokens=settings.max_context_tokens,
                                    chars_per_token=settings.chars_per_token, use_tokenizer=settings.use_tokenizer)

    def prepare(self, request: AnswerRequest) -> AnswerRequest:
        """Validate and cap a request; raises RagmeshError for input the caller must fix."""
        limits = self._settings
        if not request.question.strip():
            raise RagmeshError(ErrorCode.QUERY_EMPTY, "question is empty")
        if len(request.question) > limits.max_question_chars:
            raise RagmeshError(ErrorCode.QUERY_TOO_LONG, f"question is longer than {limits.max_question_chars} "
                               "characters", {"max_chars": limits.max_question_chars})
        if len(request.sources) > limits.max_sources:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"at most {limits.max_sources} sources per request",
                               {"max_sources": limits.max_sources, "sources": len(request.sources)})
        ids = [s.source_id for s in request.sources]
        if any(not _SOURCE_ID.fullmatch(i) for i in ids) or len(set(ids)) != len(ids):
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "source ids must be unique and look like S1, S2, ...")
        if request.max_tokens < 0:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "max_tokens must be 0 (default) or positive")
        if any(turn.role not in ("user", "assistant") for turn in request.history):
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "history roles must be 'user' or 'assistant'")
        history = [HistoryTurn(t.role, t.content[: limits.max_turn_chars]) for t in request.history
                   if t.content.strip()]
        history = history[-limits.max_history_turns:] if limits.max_history_turns > 0 else []
        sources = [cut_source(s, limits.max_source_chars) for s in request.sources]
        max_tokens = min(request.max_tokens or limits.default_max_tokens, limits.max_tokens_limit)
        return AnswerRequest(request.question, sources, history, request.request_id, max_tokens)

    async def answer(self, request: AnswerRequest, *, time_remaining: float | None) -> AsyncIterator[AnswerEvent]:
        request = self.prepare(request)
        started = time.perf_counter()
        if not request.sources:
            yield PromptFit()
            yield AnswerToken(REFUSAL_TEXT)
            yield CitedSources(())
            yield self._finish(request, AnswerDone(AnswerStatus.INSUFFICIENT_EVIDENCE, "", "no_sources",
                                                   REFUSAL_TEXT), started, attempts=0)
            return
        budget = self._settings.timeout_s
        if time_remaining is not None:
            budget = min(budget, time_remaining - DEADLINE_MARGIN_S)
        deadline = asyncio.get_running_loop().time() + budget
        fitted = await self._budget.fit(request.question, request.sources, request.history, request.max_tokens)
        yield fitted.fit
        request = replace(request, sources=fitted.sources, history=fitted.history, max_tokens=fitted.max_tokens)
        checker = CitationChecker(request.sources)
        sent = _Sent()
        attempt = _Attempt(0)
        problems: list[str] = []
        for number in (1, 2):
            attempt = _Attempt(number)
            messages = build_messages(request.question, request.sources, request.history, problems=problems)
            segments = self._attempt(messages, request.max_tokens, checker, attempt, deadline)
            try:
                # aclosing: if our caller hangs up while we wait at a yield, the attempt (and with
                # it the runtime's HTTP stream) is closed now, not whenever it is collected.
                async with contextlib.aclosing(segments):
                    async for segment, cited in segments:
                        if not sent.parts:
                            segment = segment.lstrip()
                            TTFT.observe(time.perf_counter() - started)
                        sent.parts.append(segment)
                        sent.cited.update(dict.fromkeys(cited))
                        yield AnswerToken(segment)
            except Exception:
                log.exception("generation attempt crashed")
                attempt.fail(RagmeshError(ErrorCode.INTERNAL, "internal error"))
            if attempt.outcome is _Outcome.UNVERIFIED:
                VERIFICATION_FAILURES.labels(problem=attempt.problems[0]).inc()
                if not sent.parts and number == 1:
                    problems = [PROBLEM_TEXT[p] for p in attempt.problems]
                    log.info("regenerating", extra={"fields": {"problems": sorted(set(attempt.problems))}})
                    continue
            break
        done = self._conclude(attempt, sent)
        if done.answer_status is AnswerStatus.INSUFFICIENT_EVIDENCE:
            TTFT.observe(time.perf_counter() - started)
            yield AnswerToken(REFUSAL_TEXT)
        yield CitedSources(tuple(sent.cited))
        done = replace(done, repaired=attempt.repaired)
        yield self._finish(request, done, started, attempts=attempt.number, problems=attempt.problems)

    def _conclude(self, attempt: _Attempt, sent: _Sent) -> AnswerDone:
        model, answer = attempt.model, sent.text
        if attempt.error is not None:
            return AnswerDone(AnswerStatus.WITHHELD, model, "error", answer, ("generation",),
                              attempt.error.code.value, attempt.error.message)
        if attempt.outcome is _Outcome.VERIFIED:
            return AnswerDone(AnswerStatus.ANSWERED, model, attempt.finish_reason or "stop", answer)
        if attempt.outcome is _Outcome.REFUSED:
            if sent.parts:
                return AnswerDone(AnswerStatus.ANSWERED, model, "refused", answer)
            return AnswerDone(AnswerStatus.INSUFFICIENT_EVIDENCE, model, "refused", REFUSAL_TEXT)
        if sent.parts:
            return AnswerDone(AnswerStatus.ANSWERED, model, "verification_truncated", answer)
        return AnswerDone(AnswerStatus.WITHHELD, model, "verification_failed", answer, ("generation",), "",
                          "the generated answer could not be verified against its sources")

    def _finish(self, request: AnswerRequest, done: AnswerDone, started: float, *, attempts: int,
                problems: list[str] | None = None) -> AnswerDone:
        done = replace(done, attempts=attempts, problems=tuple(dict.fromkeys(problems or ())))
        ANSWERS.labels(status=done.answer_status.value).inc()
        for component in done.degraded:
            shared_metrics.DEGRADED.labels("generation", component).inc()
        log.info("answer finished", extra={"fields": {
            "status": done.answer_status.value, "finish_reason": done.finish_reason,
            "error_code": done.error_code, "attempts": attempts, "problems": sorted(set(problems or ())),
            "sources": len(request.sources), "answer_chars": len(done.answer), "model": done.model,
            "repaired": done.repaired,
            "question_hash": query_hash(request.question),
            "ms": round((time.perf_counter() - started) * 1000, 1)}})
        return done

    async def _attempt(
        self, messages: list[dict[str, str]], max_tokens: int, checker: CitationChecker, attempt: _Attempt,
        deadline: float,
    ) -> AsyncIterator[tuple[str, tuple[str, ...]]]:
        """Verified segments of one model call; the outcome is left in ``attempt``."""
        loop = asyncio.get_running_loop()
        span = self._tracer.start_span("chat", kind=trace.SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.system": self._model.system,
            # gen_ai.provider.name replaces gen_ai.system in newer semantic conventions.
            "gen_ai.provider.name": self._model.system,
            "gen_ai.request.max_tokens": max_tokens, "gen_ai.request.temperature": 0.0,
            "ragmesh.generation.attempt": attempt.number})
        try:
            try:
                async with asyncio.timeout_at(deadline):
                    with _current(span):
                        attempt.model = await self._model.model_id()
            except TimeoutError:
                attempt.fail(RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "generation deadline exceeded"))
                return
            except RagmeshError as exc:
                attempt.fail(exc)
                return
            span.update_name(f"chat {attempt.model}")
            span.set_attribute("gen_ai.request.model", attempt.model)
            buffer = SegmentBuffer()
            received = released = False
            # A runtime that ignores max_tokens is stopped here, not at the deadline.
            max_chars, chars = max_tokens * MAX_CHARS_PER_TOKEN, 0
            async with contextlib.aclosing(self._model.stream(messages, max_tokens=max_tokens)) as stream:
                while True:
                    limit = self._settings.idle_timeout_s if received else self._settings.first_token_timeout_s
                    remaining = deadline - loop.time()
                    try:
                        if remaining <= 0:
                            raise TimeoutError
                        async with asyncio.timeout(min(limit, remaining)):
                            with _current(span):
                                delta = await anext(stream)
                    except StopAsyncIteration:
                        break
                    except TimeoutError:
                        stalled = limit < remaining
                        attempt.fail(RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "generation runtime stalled"
                                                  if stalled else "generation deadline exceeded"))
                        return
                    except RagmeshError as exc:
                        attempt.fail(exc)
                        return
                    received = True
                    chars += len(delta.text)
                    if chars > max_chars:
                        attempt.fail(RagmeshError(ErrorCode.RUNTIME_ERROR,
                                                  "generation runtime did not stop at max_tokens"))
                        return
                    attempt.model = delta.model or attempt.model
                    attempt.finish_reason = delta.finish_reason or attempt.finish_reason
                    for segment in buffer.feed(delta.text):
                        cited = self._verify(segment, checker, attempt)
                        if cited is None:
                            return
                        released = True
                        yield segment, cited
                    if INSUFFICIENT_EVIDENCE in buffer.pending:
                        attempt.outcome = _Outcome.REFUSED
                        return
            if not received:
                attempt.fail(RagmeshError(ErrorCode.RUNTIME_ERROR, "generation runtime sent an empty stream"))
                return
            segments, tail = buffer.finish()
            for segment in segments:
                cited = self._verify(segment, checker, attempt)
                if cited is None:
                    return
                released = True
                yield segment, cited
            if tail.strip() and self._settings.attribution and attempt.finish_reason != "length":
                repaired = self._attribute(tail, checker, attempt)
                ATTRIBUTIONS.labels(outcome="repaired" if repaired else "not_attributable").inc()
                for segment, cited in repaired or ():
                    released = attempt.repaired = True
                    yield segment, cited
                tail = "" if repaired else tail
            if tail.strip():
                attempt.outcome, attempt.problems = _Outcome.UNVERIFIED, ["no_citation"]
            elif not released:
                attempt.outcome, attempt.problems = _Outcome.UNVERIFIED, ["empty"]
            else:
                attempt.outcome = _Outcome.VERIFIED
        finally:
            span.set_attribute("gen_ai.response.model", attempt.model)
            if attempt.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", [attempt.finish_reason])
            span.set_attribute("ragmesh.generation.outcome", attempt.outcome.value)
            if attempt.error is not None:
                span.set_attribute("error.type", attempt.error.code.value)
                span.set_status(trace.StatusCode.ERROR, attempt.error.code.value)
            span.end()

    @classmethod
    def _attribute(cls, tail: str, checker: CitationChecker, attempt: _Attempt) -> list[tuple[str, tuple[str, ...]]]:
        """The uncited end of a finished answer as verified segments, cited by the sources that
        hold its sentences; empty when some sentence is in no source or a check still fails
        (all or nothing: a half-repaired answer would read as if the rest had been checked)."""
        cited_text = attribute(tail, checker.indexed)
        if cited_text is None:
            return []
        buffer = SegmentBuffer()
        segments = buffer.feed(cited_text)
        more, rest = buffer.finish()
        segments += more
        probe = _Attempt(attempt.number)
        checked = [(segment, cls._verify(segment, checker, probe)) for segment in segments]
        if rest.strip() or any(cited is None for _, cited in checked):
            return []
        return [(segment, cited) for segment, cited in checked if cited is not None]

    @staticmethod
    def _verify(segment: str, checker: CitationChecker, attempt: _Attempt) -> tuple[str, ...] | None:
        """The segment's citations if it may be sent; None (outcome set) if it may not."""
        if INSUFFICIENT_EVIDENCE in segment:
            attempt.outcome = _Outcome.REFUSED
            return None
        check = checker.check(segment)
        if not check.ok:
            attempt.outcome, attempt.problems = _Outcome.UNVERIFIED, [p.kind for p in check.problems]
            return None
        return check.cited


def _current(span: trace.Span):
    """``span`` as the current span around one await of the model call. What escapes the await is
    not the span's outcome: StopAsyncIteration is the stream's normal end, and failures are set on
    the span once, with their error code, when the attempt ends (``_attempt``'s ``finally``)."""
    return trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False)
