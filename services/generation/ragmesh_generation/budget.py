"""Fit the evidence prompt into the model's context: whole sources while they fit, then one cut
source, then none; what was dropped or cut is reported (the ``PromptFit`` event, ``meta`` on gRPC).

The context length comes from ``RAGMESH_GENERATION_MAX_CONTEXT_TOKENS``, else from what the
runtime reports on ``/v1/models`` (vLLM's ``max_model_len``, llama.cpp's ``meta.n_ctx``); with
neither, there is no token budget and only the per-source character cap applies. Room is kept for
the answer (``max_tokens``) and a reserve (``RESERVE_SHARE`` of the context, and
``MESSAGE_OVERHEAD_TOKENS`` per chat message for the template's role markers).

Counting: first a conservative estimate from characters (``estimate_tokens``); only when the
estimate does not fit are the pieces counted with the runtime's tokenizer (llama.cpp and vLLM
serve ``/tokenize``), so the usual request costs no extra call. Measured against SmolLM2's
tokenizer over the sections of product-docs, xquad-en and xquad-zh
(``bench/generation_checks.py --measure-tokens``), real/estimated tokens are at p95 0.94, 0.69
and 1.04 (max 1.0, 0.7, 1.05): the estimate rarely undercounts, and the reserve covers it when it does.

Sources keep their ids (S1, S3 when S2 was dropped): the gateway maps citations back by id.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, replace
from typing import Awaitable, Callable, Sequence

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_generation.domain import EvidenceSource, HistoryTurn, PromptFit
from ragmesh_generation.ports import ChatModel
from ragmesh_generation.prompt import build_messages, render_source

log = logging.getLogger("ragmesh.generation")

MESSAGE_OVERHEAD_TOKENS = 8  # <|im_start|>role\n ... <|im_end|>\n, and the assistant's opening
RESERVE_SHARE = 0.1  # of the context: the estimate's error, the template's own text
MIN_SOURCE_TOKENS = 48  # a source cut shorter than this says too little to be worth its place


def estimate_tokens(text: str, chars_per_token: float) -> int:
    """An upper estimate: letters, digits and spaces at ``chars_per_token``, ASCII symbols one
    token each (tables and code are dense), other characters two (byte-level BPE splits CJK)."""
    word = symbols = 0
    for ch in text:
        if ch.isascii():
            if ch.isalnum() or ch.isspace():
                word += 1
            else:
                symbols += 1
    return math.ceil(word / chars_per_token) + symbols + 2 * (len(text) - word - symbols)


@dataclass(frozen=True)
class FittedPrompt:
    """What the model is sent: the sources and history that fit, the answer cap, the report."""

    sources: list[EvidenceSource]
    history: list[HistoryTurn]
    max_tokens: int
    fit: PromptFit


class PromptBudget:
    """Chooses the sources (and history) that fit; one per service, the runtime asked lazily."""

    def __init__(self, model: ChatModel, *, max_context_tokens: int, chars_per_token: float,
                 use_tokenizer: bool) -> None:
        self._model = model
        self._configured = max_context_tokens
        self._chars_per_token = chars_per_token
        self._use_tokenizer = use_tokenizer

    async def context_tokens(self) -> int:
        if self._configured > 0:
            return self._configured
        try:
            return await self._model.context_tokens() or 0
        except RagmeshError:
            return 0  # the model call that follows reports the runtime's state

    async def fit(self, question: str, sources: Sequence[EvidenceSource], history: Sequence[HistoryTurn],
                  max_tokens: int) -> FittedPrompt:
        context = await self.context_tokens()
        if context <= 0:
            return FittedPrompt(list(sources), list(history), max_tokens, PromptFit())
        # An answer cap larger than half the context would leave the evidence no room at all.
        max_tokens = min(max_tokens, context // 2)
        budget = int(context * (1 - RESERVE_SHARE)) - max_tokens
        fitted, by = await _fit(question, sources, history, budget, self._estimate), "estimate"
        if fitted is None or fitted.dropped or fitted.cut:
            counter = await self._tokenizer()
            if counter is not None:
                fitted, by = await _fit(question, sources, history, budget, counter), "tokenizer"
        if fitted is None:
            raise RagmeshError(ErrorCode.QUERY_TOO_LONG, "the question leaves no room for evidence in the "
                               "model's context", {"context_tokens": context, "max_tokens": max_tokens})
        fit = PromptFit(context_tokens=context, prompt_tokens=fitted.tokens, sources_dropped=tuple(fitted.dropped),
                        sources_cut=tuple(fitted.cut), counted_by=by)
        if fitted.dropped or fitted.cut:
            log.info("evidence cut to the context", extra={"fields": {
                "context_tokens": context, "prompt_tokens": fitted.tokens, "dropped": fitted.dropped,
                "cut": fitted.cut, "by": by}})
        return FittedPrompt(fitted.sources, fitted.history, max_tokens, fit)

    async def _estimate(self, text: str) -> int:
        return estimate_tokens(text, self._chars_per_token)

    async def _tokenizer(self) -> Counter | None:
        """Exact counts from the runtime (cached for this request), or None when it has no tokenizer."""
        if not self._use_tokenizer:
            return None
        try:
            if await self._model.count_tokens(["probe"]) is None:
                return None
        except RagmeshError:
            return None
        model, counted = self._model, {}

        async def count(text: str) -> int:
            if text not in counted:
                counts = await model.count_tokens([text])
                counted[text] = counts[0] if counts else estimate_tokens(text, self._chars_per_token)
            return counted[text]

        return count


Counter = Callable[[str], Awaitable[int]]


@dataclass
class _Fitted:
    sources: list[EvidenceSource]
    history: list[HistoryTurn]
    dropped: list[str]
    cut: list[str]
    tokens: int


async def _fit(question: str, sources: Sequence[EvidenceSource], history: Sequence[HistoryTurn], budget: int,
               count: Counter) -> _Fitted | None:
    """Whole sources in rank order while they fit, a cut one where it still pays, the rest dropped;
    the oldest history turns go first when the question and history alone leave no room."""
    history = list(history)
    while True:
        # The strict retry prompt is the longer one: fit that, and both attempts send the same sources.
        messages = build_messages(question, [], history, problems=[STRICT_PROBLEMS_ALLOWANCE])
        # Each message's role markers, and the assistant turn the template opens after them.
        fixed = sum([await count(m["content"]) + MESSAGE_OVERHEAD_TOKENS for m in messages]) + MESSAGE_OVERHEAD_TOKENS
        if fixed + MIN_SOURCE_TOKENS <= budget or not history:
            break
        history = history[1:]
    left = budget - fixed
    fitted = _Fitted([], history, [], [], 0)
    for source in sources:
        cost = await count(render_source(source)) + 1
        if cost > left and left >= MIN_SOURCE_TOKENS:
            shorter = await _cut_to(source, left, count)
            if shorter is not None:
                fitted.cut.append(source.source_id)
                source, cost = shorter, await count(render_source(shorter)) + 1
        if cost <= left:
            fitted.sources.append(source)
            left -= cost
        else:
            fitted.dropped.append(source.source_id)
    if sources and not fitted.sources:
        return None
    fitted.tokens = budget - left
    return fitted


async def _cut_to(source: EvidenceSource, tokens: int, count: Counter) -> EvidenceSource | None:
    """The source cut (around its retrieved chunk) to at most ``tokens``, or None."""
    overhead = await count(render_source(replace(source, text=""))) + 1
    chars = len(source.text) * (tokens - overhead) // max(1, await count(source.text))
    for _ in range(6):
        if chars < 1:
            return None
        shorter = cut_source(source, chars)
        if await count(render_source(shorter)) + 1 <= tokens:
            return shorter
        chars = int(chars * 0.85)
    return None


def cut_source(source: EvidenceSource, max_chars: int) -> EvidenceSource:
    """At most ``max_chars`` of the source: whole lines around its focus (the retrieved chunk),
    else its head. A parent section longer than the limit would otherwise lose the very chunk
    retrieval found in it."""
    text = source.text
    if len(text) <= max_chars:
        return source
    probe = source.focus.strip()[:200]
    at = text.find(probe) if probe else -1
    if at < 0:
        return replace(source, text=text[:max_chars])
    focus_end = min(at + len(source.focus.strip()), len(text))
    begin = max(0, min(at - max(0, max_chars - (focus_end - at)) // 2, len(text) - max_chars))
    end = begin + max_chars
    line_start = text.find("\n", begin, at)  # start at a line, when one starts before the focus
    if begin > 0 and line_start >= 0:
        begin = line_start + 1
    line_end = text.rfind("\n", focus_end, end)  # and end at one, when one ends after it
    if end < len(text) and line_end >= 0:
        end = line_end
    return replace(source, text=text[begin:end])


#: Stands for the failure kinds the strict retry names ("a quote not found in ..., ...").
STRICT_PROBLEMS_ALLOWANCE = "a statement its cited sources do not support, a quote not found in the source it cites"
