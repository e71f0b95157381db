"""Retrieval over gRPC: the SearchBackend, CorpusCatalog and IndexedSources ports."""

from __future__ import annotations

from ragmesh.v1 import retrieval_pb2, retrieval_pb2_grpc
from ragmesh_common.rpc.client import unary

from ragmesh_gateway.catalog import AllCorporaLister, CorpusCatalog, CorpusInfo, IndexStats
from ragmesh_gateway.clients.channels import Channels
from ragmesh_gateway.clients.convert import chunk_from_pb, filters_to_pb, message_from, record_from, scored_from_pb
from ragmesh_gateway.files.ports import IndexedSources
from ragmesh_gateway.search.models import ChunkBatch, RetrievalQuery, RetrievalResult
from ragmesh_gateway.search.ports import SearchBackend

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
            message_from(retrieval_pb2.SearchRequest, query, filters=filters_to_pb(query.filters)),
            timeout=self._timeout_s,
            peer=PEER,
        )
        return record_from(RetrievalResult, reply, results=[scored_from_pb(r) for r in reply.results])

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
            record_from(CorpusInfo, c, visibility=c.visibility or "public", state=c.state or "empty")
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
        return record_from(IndexStats, reply)
