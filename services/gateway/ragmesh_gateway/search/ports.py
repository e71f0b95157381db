"""What the search pipeline needs from the outside world; adapters live in ragmesh_gateway.clients."""

from __future__ import annotations

import abc

from ragmesh_gateway.search.models import ChunkBatch, RerankCandidate, RerankedIndex, RetrievalQuery, RetrievalResult


class SearchBackend(abc.ABC):
    """Hybrid retrieval over the active index versions, and chunk reads pinned to a version."""

    @abc.abstractmethod
    async def search(self, query: RetrievalQuery) -> RetrievalResult: ...

    @abc.abstractmethod
    async def batch_get(
        self,
        chunk_ids: list[str],
        *,
        index_version: str,
        readable_corpora: tuple[str, ...],
        include_content: bool,
    ) -> ChunkBatch: ...


class Reranker(abc.ABC):
    @abc.abstractmethod
    async def rerank(self, query: str, candidates: list[RerankCandidate]) -> list[RerankedIndex]:
        """Best first. Raises RagmeshError when the reranker is down or past its deadline."""
