"""Domain results -> the HTTP/MCP DTOs (one mapping, shared by REST, SSE and MCP)."""

from __future__ import annotations

from ragmesh_common.chunk_record import CHUNK_FIELDS, Chunk

from ragmesh_gateway.citations import citation_url
from ragmesh_gateway.search.models import Filters
from ragmesh_gateway.search.schemas import (
    ArticleChunk,
    BatchGetResponse,
    Scores,
    SearchFilters,
    SearchHit,
    SearchRequest,
    SearchResponse,
    SecuritySummary,
)
from ragmesh_gateway.search.service import (
    ChunkRead,
    GuardedChunk,
    GuardReport,
    RankedSource,
    SearchOutcome,
    SearchParams,
)


def search_params(request: SearchRequest) -> SearchParams:
    return SearchParams(
        query=request.query,
        top_k=request.top_k,
        filters=filters_from(request.filters),
        include_content=request.include_content,
    )


def filters_from(dto: SearchFilters | None) -> Filters:
    if dto is None:
        return Filters()
    return Filters(
        corpora=(dto.corpus,) if dto.corpus else (),
        library=dto.library or "",
        version=dto.version or "",
        tags=tuple(dto.tags),
        path_prefix=dto.path_prefix or "",
    )


# The record's fields that the public chunk shows as they are, by name; read once.
_SHOWN_AS_IS = tuple(name for name in ArticleChunk.__struct_fields__ if name in CHUNK_FIELDS)


def _chunk_fields(chunk: Chunk, guard_rules: tuple[str, ...], origin: str) -> dict:
    """A Chunk as ArticleChunk's fields: those it shares by name, then the ones it shows otherwise
    (``url`` absolute on ``origin``, the gateway's public origin, when it is known)."""
    fields = {name: getattr(chunk, name) for name in _SHOWN_AS_IS}
    has_lines = chunk.line_start > 0 and chunk.line_end > 0
    fields.update(
        heading_path=list(chunk.heading_path),
        url=citation_url(chunk, origin),
        content=chunk.content or None,
        source_lines=[chunk.line_start, chunk.line_end] if has_lines else None,
        page=chunk.page or None,
        guard_rules=list(guard_rules),
    )
    return fields


def article_chunk(guarded: GuardedChunk, origin: str = "") -> ArticleChunk:
    return ArticleChunk(**_chunk_fields(guarded.chunk, guarded.guard_rules, origin))


def search_hit(source: RankedSource, origin: str = "") -> SearchHit:
    s = source.scores
    return SearchHit(
        source_id=source.source_id,
        scores=Scores(
            dense=s.get("dense"), sparse=s.get("sparse"), fused=s.get("fused"), rerank=s.get("rerank")
        ),
        **_chunk_fields(source.chunk, source.guarded.guard_rules, origin),
    )


def security_summary(report: GuardReport) -> SecuritySummary:
    summary = report.summary
    return SecuritySummary(
        findings_count=summary.findings_count,
        max_severity=summary.max_severity.value if summary.max_severity else None,
        rules=list(summary.rules),
        flagged_sources=list(report.flagged_sources),
    )


def single_version(versions: list[str]) -> str | None:
    return versions[0] if len(versions) == 1 else None


def search_response(outcome: SearchOutcome, request_id: str, origin: str = "") -> SearchResponse:
    meta = outcome.retrieval
    versions = outcome.index_versions
    return SearchResponse(
        request_id=request_id,
        query_mode=meta.query_mode,
        index_version=single_version(versions),
        index_versions=versions,
        degraded=list(outcome.degraded),
        results=[search_hit(s, origin) for s in outcome.sources],
        filtered_by_threshold=meta.filtered_by_threshold,
        hint=meta.hint or None,
        top_k_truncated=meta.top_k_truncated,
        skipped_libraries=list(meta.skipped_libraries),
        security=security_summary(outcome.security),
    )


def batch_get_response(read: ChunkRead, request_id: str, requested_version: str | None,
                       origin: str = "") -> BatchGetResponse:
    versions = list(dict.fromkeys(g.chunk.index_version for g in read.chunks if g.chunk.index_version))
    return BatchGetResponse(
        request_id=request_id,
        index_version=requested_version or single_version(versions),
        chunks=[article_chunk(g, origin) for g in read.chunks],
        missing=list(read.missing),
        security=security_summary(read.security),
    )
