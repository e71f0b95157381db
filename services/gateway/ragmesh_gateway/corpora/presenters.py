"""Corpus domain types -> DTOs: the fields a DTO shares with the domain type, by name.

``CorpusInfo.root`` is internal (the folder the indexer read) and no DTO declares it, so it is never
sent; empty optional strings are shown as null.
"""

from __future__ import annotations

from typing import Any

from ragmesh_gateway.catalog import CorpusInfo, IndexStats
from ragmesh_gateway.corpora.schemas import CorporaResponse, CorpusView, StatsResponse


def _shared(source: Any, dto: type, **given: Any) -> dict[str, Any]:
    return {name: getattr(source, name) for name in dto.__struct_fields__ if name not in given} | given


def corpus_view(c: CorpusInfo) -> CorpusView:
    return CorpusView(**_shared(c, CorpusView, active_index_version=c.active_index_version or None,
                                keyword_only_reason=c.keyword_only_reason or None))


def corpora_response(corpora: list[CorpusInfo], request_id: str) -> CorporaResponse:
    return CorporaResponse(request_id=request_id, corpora=[corpus_view(c) for c in corpora])


def stats_response(stats: IndexStats, request_id: str) -> StatsResponse:
    return StatsResponse(**_shared(stats, StatsResponse, request_id=request_id))
