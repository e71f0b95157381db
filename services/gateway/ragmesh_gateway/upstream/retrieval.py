"""Retrieval over gRPC: the SearchBackend, CorpusCatalog and IndexedSources ports."""

from __future__ import annotations

from ragmesh.v1 import retrieval_pb2, retrieval_pb2_grpc
from ragmesh_common.rpc.client import unary

from ragmesh_gateway.corpora.ports import AllCorporaLister, CorpusCatalog, CorpusInfo, IndexStats
from ragmesh_gateway.files.ports import IndexedSources
from ragmesh_gateway.search.models import ChunkBatch, RetrievalQuery, RetrievalResult
from ragmesh_gateway.search.ports import SearchBackend
from ragmesh_gateway.upstream.channels import Channels
from ragmesh_gateway.upstream.convert import chunk_from_pb, filters_to_pb, scored_from_pb

PEER = "retrieval"


class GrpcRetrieval(AllCorporaLister, SearchBackend, CorpusCatalog, IndexedSources):
    def __init__(self, channels: Channels, *, timeout_s: float) -> None:
        self._channels = channels
        self._timeout_s = timeout_s

    @property
    def _stub(self) -> retrieval_pb2_grpc.RetrievalStub:
        return retrieval_pb2_grpc.RetrievalStub(self._channels.get(PEER))

    async def search(self, query: RetrievalQuery) -> RetrievalResult:
        reply = await unary(
            self._stub.Search,
            retrieval_pb2.SearchRequest(
                query=query.query,
                top_k=query.top_k,
                filters=filters_to_pb(query.filters),
                readable_corpora=list(query.readable_corpora),
                include_content=query.include_content,
            ),
            timeout=self._timeout_s,
            peer=PEER,
        )
        return RetrievalResult(
            results=[scored_from_pb(r) for r in reply.results],
            query_mode=reply.query_mode,
            index_versions=list(reply.index_versions),
            degraded=list(reply.degraded),
            filtered_by_threshold=reply.filtered_by_threshold,
            hint=reply.hint,
            top_k_truncated=reply.top_k_truncated,
            skipped_libraries=list(reply.skipped_libraries),
        )

    async def batch_get(
        self,
        chunk_ids: list[str],
        *,
        index_version: str,
        readable_corpora: tuple[str, ...],
        include_content: bool,
    ) -> ChunkBatch:
        reply = await unary(
            self._stub.BatchGetChunks,
            retrieval_pb2.BatchGetChunksRequest(
                chunk_ids=chunk_ids,
                index_version=index_version,
                readable_corpora=list(readable_corpora),
                include_content=include_content,
            ),
            timeout=self._timeout_s,
            peer=PEER,
        )
        return ChunkBatch(chunks=[chunk_from_pb(c) for c in reply.chunks], missing=list(reply.missing))

    async def list_all_corpora(self) -> list[CorpusInfo]:
        return await self._list(retrieval_pb2.ListCorporaRequest(all_corpora=True))

    async def list_corpora(self, readable_corpora: tuple[str, ...]) -> list[CorpusInfo]:
        return await self._list(retrieval_pb2.ListCorporaRequest(readable_corpora=list(readable_corpora)))

    async def _list(self, request: retrieval_pb2.ListCorporaRequest) -> list[CorpusInfo]:
        reply = await unary(
            self._stub.ListCorpora,
            request,
            timeout=self._timeout_s,
            peer=PEER,
        )
        return [
            CorpusInfo(
                corpus=c.corpus,
                library=c.library,
                version=c.version,
                visibility=c.visibility or "public",
                active_index_version=c.active_index_version,
                points=c.points,
                documents=c.documents,
                state=c.state or "empty",
                license=c.license,
                source_url=c.source_url,
                root=c.root,
                embedder=c.embedder,
                search=c.search,
                keyword_only_reason=c.keyword_only_reason,
            )
            for c in reply.corpora
        ]

    async def has_source(self, corpus: str, source_path: str, readable_corpora: tuple[str, ...]) -> bool:
        reply = await unary(
            self._stub.HasSource,
            retrieval_pb2.HasSourceRequest(
                corpus=corpus, source_path=source_path, readable_corpora=list(readable_corpora)
            ),
            timeout=self._timeout_s,
            peer=PEER,
        )
        return reply.found

    async def stats(self, readable_corpora: tuple[str, ...]) -> IndexStats:
        reply = await unary(
            self._stub.Stats,
            retrieval_pb2.StatsRequest(readable_corpora=list(readable_corpora)),
            timeout=self._timeout_s,
            peer=PEER,
        )
        return IndexStats(
            corpora=reply.corpora,
            points=reply.points,
            documents=reply.documents,
            embedding_model=reply.embedding_model,
            vector_size=reply.vector_size,
            lexical_tokenizer=reply.lexical_tokenizer,
            store=reply.store,
        )
