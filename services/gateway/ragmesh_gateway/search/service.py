"""The search pipeline: retrieve candidates, rerank them, keep top_k, defang untrusted text.

A reranker that is down or past its deadline never fails a search: results come back in fused
order and the response says ``degraded: ["rerank"]``, as does the request's server span (ERROR,
``ragmesh.degraded``). Logs carry a query hash, never the query.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Protocol

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import embedding_text, is_chunk_id
from ragmesh_common.telemetry import Stopwatch, mark_request_degraded, query_hash

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.search.models import (
    Chunk,
    Filters,
    RerankCandidate,
    RetrievalQuery,
    RetrievalResult,
    ScoredChunk,
)
from ragmesh_gateway.search.ports import Reranker, SearchBackend
from ragmesh_gateway.security.findings import FindingsSummary, GuardResult

log = logging.getLogger("ragmesh.gateway.search")

RERANK = "rerank"


class TextGuard(Protocol):
    """Scans untrusted text and returns it neutralized (ragmesh_gateway.security.InjectionGuard)."""

    def scan(self, text: str) -> GuardResult: ...


@dataclass(frozen=True, slots=True)
class SearchParams:
    query: str
    top_k: int
    filters: Filters = Filters()
    include_content: bool = False


@dataclass(frozen=True, slots=True)
class GuardedChunk:
    chunk: Chunk  # quote and content already neutralized
    guard_rules: tuple[str, ...] = ()
    results: tuple[GuardResult, ...] = ()


@dataclass(frozen=True, slots=True)
class RankedSource:
    source_id: str
    guarded: GuardedChunk
    scores: dict[str, float]

    @property
    def chunk(self) -> Chunk:
        return self.guarded.chunk


@dataclass(frozen=True, slots=True)
class GuardReport:
    summary: FindingsSummary
    flagged_sources: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, labelled: Iterable[tuple[str, GuardedChunk]]) -> GuardReport:
        """The report over these chunks, each under its label (a source id, or a chunk id)."""
        pairs = list(labelled)
        return cls(
            summary=FindingsSummary.of(r for _, guarded in pairs for r in guarded.results),
            flagged_sources=[label for label, guarded in pairs if guarded.guard_rules],
        )


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    sources: list[RankedSource]
    retrieval: RetrievalResult
    degraded: list[str]
    security: GuardReport

    @property
    def index_versions(self) -> list[str]:
        seen = list(dict.fromkeys(s.chunk.index_version for s in self.sources if s.chunk.index_version))
        return seen or list(self.retrieval.index_versions)


@dataclass(frozen=True, slots=True)
class ChunkRead:
    chunks: list[GuardedChunk]
    missing: list[str]
    security: GuardReport


class SearchService:
    def __init__(
        self,
        backend: SearchBackend,
        reranker: Reranker,
        guard: TextGuard,
        *,
        candidates: int = 50,
        on_degraded: Callable[[str], None] = lambda component: None,
    ) -> None:
        self._backend = backend
        self._reranker = reranker
        self._guard = guard
        self._candidates = candidates
        self._on_degraded = on_degraded

    async def search(self, params: SearchParams, caller: Caller) -> SearchOutcome:
        query = params.query.strip()
        if not query:
            raise RagmeshError(ErrorCode.QUERY_EMPTY, "query is empty")
        clock = Stopwatch()
        asked = params.filters.corpora
        # Nothing readable to search: the same empty answer, without a call, whether the corpus
        # asked for is unreadable or does not exist, so neither can be told from the other.
        if caller.reads_nothing or (asked and not any(caller.can_read(c) for c in asked)):
            return SearchOutcome(
                sources=[], retrieval=RetrievalResult(results=[]), degraded=[], security=GuardReport.of([])
            )
        retrieved = await self._backend.search(
            RetrievalQuery(
                query=query,
                top_k=max(self._candidates, params.top_k),
                filters=params.filters,
                readable_corpora=tuple(caller.readable_list()),
                include_content=params.include_content,
            )
        )
        degraded = list(retrieved.degraded)
        # Retrieval applies the ACL; checking again here keeps a misconfigured backend from leaking.
        readable = [r for r in retrieved.results if caller.can_read(r.chunk.corpus)]
        ranked = await self._rerank(query, readable, degraded)
        kept = ranked[: params.top_k]
        guarded = await asyncio.to_thread(self._guard_all, [s.chunk for s in kept])
        sources = [
            RankedSource(source_id=f"S{i}", guarded=g, scores=dict(s.scores))
            for i, (s, g) in enumerate(zip(kept, guarded), start=1)
        ]
        log.info(
            "search",
            extra={
                "fields": {
                    "query_hash": query_hash(query),
                    "top_k": params.top_k,
                    "candidates": len(retrieved.results),
                    "returned": len(sources),
                    "degraded": degraded,
                    "ms": clock.ms,
                }
            },
        )
        mark_request_degraded(degraded)
        return SearchOutcome(
            sources=sources,
            retrieval=retrieved,
            degraded=degraded,
            security=GuardReport.of((s.source_id, s.guarded) for s in sources),
        )

    async def read_chunks(
        self, chunk_ids: list[str], *, index_version: str, include_content: bool, caller: Caller
    ) -> ChunkRead:
        bad = [cid for cid in chunk_ids if not is_chunk_id(cid)]
        if bad:
            raise RagmeshError(
                ErrorCode.MALFORMED_CHUNK_ID, "chunk ids must be lower-case UUID strings", {"count": len(bad)}
            )
        unique = list(dict.fromkeys(chunk_ids))
        if caller.reads_nothing:
            if index_version:  # as retrieval answers a version no readable corpus has (removed, say)
                raise RagmeshError(ErrorCode.INDEX_VERSION_GONE, "that index version is not available",
                                   {"index_version": index_version})
            return ChunkRead(chunks=[], missing=unique, security=GuardReport.of([]))
        batch = await self._backend.batch_get(
            unique,
            index_version=index_version,
            readable_corpora=tuple(caller.readable_list()),
            include_content=include_content,
        )
        readable = [c for c in batch.chunks if caller.can_read(c.corpus)]
        hidden = [c.chunk_id for c in batch.chunks if not caller.can_read(c.corpus)]
        guarded = await asyncio.to_thread(self._guard_all, readable)
        return ChunkRead(
            chunks=guarded,
            missing=list(batch.missing) + hidden,
            security=GuardReport.of((g.chunk.chunk_id, g) for g in guarded),
        )

    async def _rerank(self, query: str, results: list[ScoredChunk], degraded: list[str]) -> list[ScoredChunk]:
        if len(results) < 2:
            return list(results)
        try:
            order = await self._reranker.rerank(query, [rerank_candidate(r) for r in results])
        except RagmeshError as exc:
            # Never silent: the response says so, a counter counts it, the log says why.
            degraded.append(RERANK)
            self._on_degraded(RERANK)
            log.warning(
                "rerank skipped", extra={"fields": {"code": exc.code.value, "query_hash": query_hash(query)}}
            )
            return list(results)
        reordered: list[ScoredChunk] = []
        seen: set[int] = set()
        for hit in order:
            if 0 <= hit.index < len(results) and hit.index not in seen:
                seen.add(hit.index)
                item = results[hit.index]
                reordered.append(ScoredChunk(chunk=item.chunk, scores={**item.scores, RERANK: hit.score}))
        # Candidates the reranker left out keep their fused order behind the reranked ones.
        reordered.extend(r for i, r in enumerate(results) if i not in seen)
        return reordered

    def _guard_all(self, chunks: list[Chunk]) -> list[GuardedChunk]:
        out = []
        for chunk in chunks:
            quote = self._guard.scan(chunk.quote)
            content = self._guard.scan(chunk.content) if chunk.content else None
            rules = {f.rule_id for f in quote.findings}
            if content is not None:
                rules |= {f.rule_id for f in content.findings}
            clean = replace(chunk, quote=quote.text, content=content.text if content else chunk.content)
            out.append(
                GuardedChunk(
                    chunk=clean,
                    guard_rules=tuple(sorted(rules)),
                    results=(quote,) if content is None else (quote, content),
                )
            )
        return out


def rerank_candidate(result: ScoredChunk) -> RerankCandidate:
    """The text the indexer embedded (so the reranker scores what was indexed, and a runtime that
    cached the indexer's vectors needs no model call) with retrieval's scores as priors."""
    chunk = result.chunk
    return RerankCandidate(
        text=embedding_text(chunk.title, chunk.heading_path, chunk.quote),
        dense=result.scores.get("dense"),
        sparse=result.scores.get("sparse"),
    )
