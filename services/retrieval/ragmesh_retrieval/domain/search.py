"""Hybrid search: embed once, one fused store query per corpus, merge, threshold, cap.

Per corpus the store runs ONE query: a dense and a BM25 prefetch, each carrying the full payload
filter (the caller's readable corpora included, so the ACL holds inside the store and not only in
the routing), fused by reciprocal rank fusion. Corpora are merged by the fused score.

Degradation is reported, never silent: embedding runtime down or slow -> BM25 only, ``query_mode``
"sparse", ``degraded`` ["embedding"], ragmesh_degraded_total. An index whose embedder is neither the
serving one nor declared compatible with it (ragmesh_common.embedders.compatibility) is searched by
BM25 alone, ``degraded`` ["embedding_model"], and the hint says why. A store that is down is an error
(UNAVAILABLE): there is nothing to degrade to.
"""

from __future__ import annotations

import asyncio
import logging
import re

import msgspec
from opentelemetry import trace

from ragmesh_common.embedders.compatibility import decide, index_embedder
from ragmesh_common.embedders.identity import EmbedderIdentity
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import CollectionMeta
from ragmesh_common.telemetry import Stopwatch, query_hash, tracer
from ragmesh_common.vectorstore.port import HybridQuery, PointFilter, ScoredHit, SparseVector, VectorStorePort

from ragmesh_retrieval import metrics
from ragmesh_retrieval.domain.catalog import ActiveCorpus, CorpusCatalog
from ragmesh_retrieval.domain.chunks import chunk_from_payload
from ragmesh_retrieval.domain.embedding import Embedder
from ragmesh_retrieval.domain.lexical import QueryEncoders
from ragmesh_retrieval.domain.model import ScoredChunk, SearchInput, SearchLimits, SearchOutcome
from ragmesh_retrieval.domain.routing import route
from ragmesh_retrieval.domain.validation import clamped_top_k, validated_filters, validated_query

log = logging.getLogger("ragmesh.retrieval.search")
_tracer = tracer("ragmesh.retrieval")

HINT_THRESHOLD = "no passage passed the relevance threshold; rephrase the question or widen the filters"
HINT_NO_MATCH_FILTERED = "no passage matched the filters; widen or remove them"
HINT_NO_MATCH = "no passage matched; rephrase the question"
HINT_NO_SIGNAL = "the query has no searchable words and semantic search is unavailable; rephrase or retry"
HINT_KEYWORD_ONLY = "semantic search is unavailable; results come from keyword search only"


class _Plan(msgspec.Struct):
    target: ActiveCorpus
    query: HybridQuery

    @property
    def mode(self) -> str:
        if self.query.dense is not None and self.query.sparse is not None:
            return "fusion"
        return "dense" if self.query.dense is not None else "sparse"


class _CollectionGone(Exception):
    """A collection vanished between routing and querying (an alias swap plus cleanup)."""


class HybridRetriever:
    def __init__(
        self,
        store: VectorStorePort,
        catalog: CorpusCatalog,
        embedder: Embedder,
        encoders: QueryEncoders,
        limits: SearchLimits,
    ) -> None:
        self.store = store
        self.catalog = catalog
        self.embedder = embedder
        self.encoders = encoders
        self.limits = limits

    async def search(self, request: SearchInput) -> SearchOutcome:
        watch = Stopwatch()
        query = validated_query(request.query, self.limits)
        top_k, truncated = clamped_top_k(request.top_k, self.limits)
        request = validated_filters(request)
        qhash = query_hash(query)
        try:
            outcome, timings = await self._search_once(query, top_k, request)
        except _CollectionGone:
            self.catalog.invalidate()
            outcome, timings = await self._search_once(query, top_k, request)
        outcome.top_k_truncated = truncated
        log.info("search", extra={"fields": {
            "query_hash": qhash, "query_chars": len(query), "top_k": top_k, "corpora": len(outcome.index_versions),
            "results": len(outcome.results), "filtered_by_threshold": outcome.filtered_by_threshold,
            "mode": outcome.query_mode, "degraded": outcome.degraded, "skipped": len(outcome.skipped_libraries),
            **timings, "total_ms": watch.ms,
        }})
        return outcome

    async def _search_once(self, query: str, top_k: int, request: SearchInput) -> tuple[SearchOutcome, dict]:
        readable = await self.catalog.readable(request.readable_corpora)
        targets, skipped = route(readable, request, self.limits.max_libraries)
        embed_watch = Stopwatch()
        mode = self._mode_for(query)
        if mode == "sparse":  # configured keyword-only: no embedding, nothing degraded
            dense, serving, degraded = None, None, []
        else:
            dense, serving = await self._embed(query)
            degraded = [] if dense is not None else ["embedding"]
        embed_ms = embed_watch.ms
        # The ACL travels into every store query. Listing the readable corpora that have an index (not
        # every name in a possibly long ACL) keeps the filter small and excludes the same points.
        acl = tuple(c.corpus for c in readable)
        refused: dict[str, str] = {}
        plans = await self._plans(targets, acl, query, dense, serving, top_k, request, degraded, mode, refused)

        query_watch = Stopwatch()
        per_corpus = await asyncio.gather(*(self._query(plan) for plan in plans))
        query_ms = query_watch.ms

        results, filtered = self._merge(plans, per_corpus, top_k, request)
        used_dense = any(p.query.dense is not None for p in plans)
        used_sparse = any(p.query.sparse is not None for p in plans)
        mode = "hybrid" if used_dense and used_sparse else ("dense" if used_dense else "sparse")
        for component in degraded:
            metrics.degraded(component)
        outcome = SearchOutcome(
            results=results,
            query_mode=mode,
            index_versions=sorted({p.target.index_version for p in plans}),
            degraded=degraded,
            filtered_by_threshold=filtered,
            hint=_hint(results, filtered, request, degraded, used_dense or used_sparse, len(targets), skipped,
                       refused),
            skipped_libraries=skipped,
        )
        return outcome, {"embed_ms": embed_ms, "query_ms": query_ms}

    def _mode_for(self, query: str) -> str:
        if self.limits.mode == "hybrid" and self.limits.cjk_mode == "sparse" and is_mostly_cjk(query):
            return "sparse"
        return self.limits.mode

    async def _embed(self, query: str) -> tuple[list[float] | None, EmbedderIdentity | None]:
        """(query vector, the serving embedder), or (None, None) when the runtime is down or too slow."""
        # A GenAI embeddings call in OpenTelemetry's semantic conventions (gen_ai.* attributes).
        with _tracer.start_as_current_span("embeddings", kind=trace.SpanKind.CLIENT,
                                           attributes={"gen_ai.operation.name": "embeddings"}) as span, \
                metrics.stage("embed"):
            try:
                async with asyncio.timeout(self.limits.embed_timeout_s):
                    model_id = await self.embedder.model_id()
                    span.update_name(f"embeddings {model_id}")
                    span.set_attribute("gen_ai.request.model", model_id)
                    serving = await self.embedder.identity()
                    vector = await self.embedder.embed_query(query)
            except (RagmeshError, TimeoutError) as exc:
                reason = exc.code.value if isinstance(exc, RagmeshError) else ErrorCode.DEADLINE_EXCEEDED.value
                span.set_attribute("ragmesh.degraded", reason)
                span.set_attribute("error.type", reason)
                log.warning("embedding unavailable, searching keywords only", extra={"fields": {"reason": reason}})
                return None, None
            span.set_attribute("ragmesh.embedding.model", model_id)
            span.set_attribute("ragmesh.embedding.dimensions", len(vector))
            span.set_attribute("gen_ai.embeddings.dimension.count", len(vector))
            return vector, serving

    async def _plans(
        self,
        targets: list[ActiveCorpus],
        acl: tuple[str, ...],
        query: str,
        dense: list[float] | None,
        serving: EmbedderIdentity | None,
        top_k: int,
        request: SearchInput,
        degraded: list[str],
        mode: str,
        refused: dict[str, str],
    ) -> list[_Plan]:
        sparse_by_config: dict[bytes, SparseVector] = {}
        plans = []
        for target in targets:
            meta = target.meta
            use_dense = dense
            if dense is not None and serving is not None:
                recorded, legacy = index_embedder(meta)
                verdict = decide(recorded, serving, query_dimension=len(dense), legacy=legacy)
                if not verdict.accepted:
                    # A vector from an embedder not declared compatible is noise against this index:
                    # keywords only, and say so.
                    use_dense = None
                    _add(degraded, "embedding_model")
                    refused[target.corpus] = verdict.reason
                    log.warning("index refused for the serving embedder", extra={"fields": {
                        "index_version": target.index_version, "corpus": target.corpus,
                        "reason": verdict.reason}})
            sparse = None
            if mode != "dense":
                sparse = await self._sparse(meta, query, sparse_by_config, degraded)
            plans.append(_Plan(target=target, query=HybridQuery(
                collection=target.collection,
                filter=PointFilter(
                    corpora=acl,
                    library=target.library if request.library else "",
                    version=request.version,
                    tags=request.tags,
                    path_prefix=request.path_prefix,
                ),
                limit=top_k,
                dense=use_dense,
                sparse=sparse if sparse is not None and sparse.indices else None,
                candidates=max(self.limits.candidates, top_k),
                rrf_k=self.limits.rrf_k,
            )))
        return plans

    async def _sparse(
        self, meta: CollectionMeta, query: str, by_config: dict[bytes, SparseVector | None], degraded: list[str]
    ) -> SparseVector | None:
        """The BM25 query vector under this index's tokenizer settings (encoded once per config)."""
        key = msgspec.json.encode(meta.lexical_config)
        if key not in by_config:
            try:
                by_config[key] = await self.encoders.encode(meta, query)
            except RagmeshError:
                # An index whose recorded tokenizer config this process cannot load: dense only.
                log.error("lexical config unusable", extra={"fields": {"index_version": meta.index_version}})
                by_config[key] = None
        if by_config[key] is None or not self.encoders.matches(meta):
            _add(degraded, "lexical")
        return by_config[key]

    async def _query(self, plan: _Plan) -> list[ScoredHit]:
        if plan.query.dense is None and plan.query.sparse is None:
            return []
        attributes = {
            # db.system before semantic conventions 1.26, db.system.name since: trace queries use either.
            "db.system": "qdrant",
            "db.system.name": "qdrant",
            "db.operation.name": "query_points",
            "db.collection.name": plan.query.collection,
            "ragmesh.query_mode": plan.mode,
            "ragmesh.limit": plan.query.limit,
        }
        with _tracer.start_as_current_span("qdrant.query_points", kind=trace.SpanKind.CLIENT,
                                           attributes=attributes) as span, metrics.stage(plan.mode):
            try:
                hits = await self.store.hybrid_query(plan.query)
            except RagmeshError as exc:
                if exc.code == ErrorCode.NOT_FOUND:
                    raise _CollectionGone() from None
                raise
            span.set_attribute("ragmesh.hits", len(hits))
            return hits

    def _merge(
        self, plans: list[_Plan], per_corpus: list[list[ScoredHit]], top_k: int, request: SearchInput
    ) -> tuple[list[ScoredChunk], int]:
        readable = set(request.readable_corpora)
        kept: list[tuple[ScoredHit, str]] = []
        filtered = 0
        for plan, hits in zip(plans, per_corpus):
            for hit in hits:
                if hit.payload.get("corpus") not in readable:
                    continue  # the store filter already excludes these; never trust one layer alone
                if not self._relevant(hit):
                    filtered += 1
                    continue
                kept.append((hit, plan.target.collection))
        kept.sort(key=lambda item: (-item[0].fused, -(item[0].dense or 0.0), item[0].id))
        results = []
        for hit, collection in kept:
            chunk = chunk_from_payload(hit.payload, collection, include_content=request.include_content)
            if chunk is None:
                continue
            scores = {"fused": hit.fused}
            if hit.dense is not None:
                scores["dense"] = hit.dense
            if hit.sparse is not None:
                scores["sparse"] = hit.sparse
            results.append(ScoredChunk(chunk=chunk, scores=scores))
            if len(results) == top_k:
                break
        return results, filtered

    def _relevant(self, hit: ScoredHit) -> bool:
        if hit.dense is None or hit.dense >= self.limits.min_dense_score:
            return True
        return hit.sparse is not None and hit.sparse >= self.limits.min_sparse_score


_HAN_CHAR = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+")


def is_mostly_cjk(text: str) -> bool:
    """More Han characters than Latin words (the runtime's generator uses the same rule)."""
    return len(_HAN_CHAR.findall(text)) > len(_LATIN_WORD.findall(text))


def _add(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)


def _hint(
    results: list[ScoredChunk],
    filtered: int,
    request: SearchInput,
    degraded: list[str],
    had_signal: bool,
    searched: int,
    skipped: list[str],
    refused: dict[str, str] | None = None,
) -> str:
    parts = []
    if not results:
        if filtered:
            parts.append(HINT_THRESHOLD)
        elif not had_signal:
            parts.append(HINT_NO_SIGNAL)
        elif request.tags or request.path_prefix or request.version:
            parts.append(HINT_NO_MATCH_FILTERED)
        else:
            parts.append(HINT_NO_MATCH)
    if "embedding" in degraded and had_signal:
        parts.append(HINT_KEYWORD_ONLY)
    for corpus, reason in sorted((refused or {}).items()):
        parts.append(f"{corpus} is searched by keywords only: {reason}")
    if skipped:
        parts.append(f"searched {searched} of {searched + len(skipped)} corpora; "
                     "name a library or corpus to search the others")
    return "; ".join(parts)
