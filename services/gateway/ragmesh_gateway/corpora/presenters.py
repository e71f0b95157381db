"""Corpus domain types -> DTOs."""

from __future__ import annotations

from ragmesh_gateway.catalog import CorpusInfo, IndexStats
from ragmesh_gateway.corpora.schemas import CorporaResponse, CorpusView, StatsResponse


def corpora_response(corpora: list[CorpusInfo], request_id: str) -> CorporaResponse:
    return CorporaResponse(
        request_id=request_id,
        corpora=[
            CorpusView(
                corpus=c.corpus,
                library=c.library,
                version=c.version,
                visibility=c.visibility,
                active_index_version=c.active_index_version or None,
                points=c.points,
                documents=c.documents,
                state=c.state,
                license=c.license,
                source_url=c.source_url,
                embedder=c.embedder,
                search=c.search,
                keyword_only_reason=c.keyword_only_reason or None,
            )
            for c in corpora
        ],
    )


def stats_response(stats: IndexStats, request_id: str) -> StatsResponse:
    return StatsResponse(
        request_id=request_id,
        corpora=stats.corpora,
        points=stats.points,
        documents=stats.documents,
        embedding_model=stats.embedding_model,
        vector_size=stats.vector_size,
        lexical_tokenizer=stats.lexical_tokenizer,
        store=stats.store,
    )
