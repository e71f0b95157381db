"""Rerank use case: validate, spend at most the caller's remaining time, return best first.

Scores are ordering signals from whatever the runtime computes (a cross-encoder on TEI, a
windowed bi-encoder on the CPU runtime); ``score_kind`` says which, and nothing here rescales
them. Errors keep their codes: the gateway falls back to the fused order on UNAVAILABLE or
DEADLINE_EXCEEDED, so those two must never be turned into something else.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from opentelemetry import trace

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import Stopwatch, query_hash, tracer

from ragmesh_rerank.fusion import Prior, PriorFusion
from ragmesh_rerank.metrics import STAGE_DURATION
from ragmesh_rerank.ports import RankedText, Reranker
from ragmesh_rerank.settings import RerankSettings

log = logging.getLogger("ragmesh.rerank")

# Left for our own reply once the runtime call is cut off, so the caller sees our
# DEADLINE_EXCEEDED (with its code) rather than its channel's.
DEADLINE_MARGIN_S = 0.05


@dataclass(frozen=True)
class RerankQuery:
    query: str
    texts: list[str]
    top_n: int = 0  # 0: all
    priors: list[Prior] = field(default_factory=list)  # none, or one per text


@dataclass(frozen=True)
class RerankOutcome:
    results: list[RankedText]  # best first
    model_id: str
    score_kind: str


class RerankService:
    def __init__(self, reranker: Reranker, settings: RerankSettings,
                 span_tracer: trace.Tracer | None = None) -> None:
        self._reranker = reranker
        self._settings = settings
        self._fusion = PriorFusion(settings.prior_dense, settings.prior_sparse)
        self._tracer = span_tracer or tracer("ragmesh.rerank")

    def validate(self, request: RerankQuery) -> RerankQuery:
        limits = self._settings
        if not request.query.strip():
            raise RagmeshError(ErrorCode.QUERY_EMPTY, "query is empty")
        if len(request.query) > limits.max_query_chars:
            raise RagmeshError(ErrorCode.QUERY_TOO_LONG, f"query is longer than {limits.max_query_chars} characters",
                               {"max_chars": limits.max_query_chars})
        if len(request.texts) > limits.max_texts:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"at most {limits.max_texts} texts per request",
                               {"max_texts": limits.max_texts, "texts": len(request.texts)})
        if request.top_n < 0:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "top_n must be 0 (all) or positive")
        if request.priors and len(request.priors) != len(request.texts):
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "priors must be empty or one per text",
                               {"priors": len(request.priors), "texts": len(request.texts)})
        # Cut, not rejected: the runtime truncates to its model's window anyway, and a long chunk
        # is still worth ranking by its beginning.
        texts = [text[: limits.max_text_chars] for text in request.texts]
        return RerankQuery(request.query, texts, request.top_n, request.priors)

    async def rerank(self, request: RerankQuery, *, time_remaining: float | None) -> RerankOutcome:
        request = self.validate(request)
        timeout = self._timeout(time_remaining)
        if not request.texts:
            return RerankOutcome([], "", "")
        clock = Stopwatch()
        started = time.perf_counter()
        with self._tracer.start_as_current_span("rerank") as span:
            span.set_attribute("ragmesh.rerank.texts", len(request.texts))
            span.set_attribute("ragmesh.rerank.top_n", request.top_n)
            try:
                identity = await self._reranker.identity(timeout=timeout)
                span.set_attribute("ragmesh.rerank.model", identity.model_id)
                span.set_attribute("ragmesh.rerank.score_kind", identity.score_kind)
                remaining = timeout - (time.perf_counter() - started)
                if remaining <= 0:
                    raise RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "deadline exceeded before reranking")
                ranked = await self._reranker.rerank(request.query, request.texts, timeout=remaining)
            except RagmeshError as exc:
                span.set_attribute("ragmesh.error_code", exc.code.value)
                log.warning("rerank failed", extra={"fields": {
                    "code": exc.code.value, "texts": len(request.texts), "query_hash": query_hash(request.query),
                    "ms": clock.ms}})
                raise
            finally:
                STAGE_DURATION.labels(stage="rerank").observe(time.perf_counter() - started)
        score_kind = identity.score_kind
        if self._fusion.active and request.priors:
            ranked = self._fusion.fuse(ranked, request.priors)
            score_kind = self._fusion.score_kind(score_kind)
        ranked = sorted(ranked, key=lambda r: r.score, reverse=True)
        if request.top_n:
            ranked = ranked[: request.top_n]
        log.info("reranked", extra={"fields": {
            "texts": len(request.texts), "returned": len(ranked), "model": identity.model_id,
            "fused": score_kind != identity.score_kind, "query_hash": query_hash(request.query), "ms": clock.ms}})
        return RerankOutcome(ranked, identity.model_id, score_kind)

    def _timeout(self, time_remaining: float | None) -> float:
        timeout = self._settings.runtime_timeout_s
        if time_remaining is not None:
            timeout = min(timeout, time_remaining - DEADLINE_MARGIN_S)
        if timeout <= 0:
            raise RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "deadline exceeded before reranking")
        return timeout
