"""``ragmesh.v1.Retrieval``: protobuf <-> domain, nothing else."""

from __future__ import annotations

import msgspec
from ragmesh.v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc

from ragmesh_common.chunk_record import Chunk, chunk_values
from ragmesh_common.telemetry import request_id_var

from ragmesh_retrieval.domain.model import SearchInput
from ragmesh_retrieval.domain.reads import CorpusDirectory
from ragmesh_retrieval.domain.search import HybridRetriever


class RetrievalServicer(retrieval_pb2_grpc.RetrievalServicer):
    def __init__(self, retriever: HybridRetriever, directory: CorpusDirectory) -> None:
        self.retriever = retriever
        self.directory = directory

    async def Search(self, request: retrieval_pb2.SearchRequest, context) -> retrieval_pb2.SearchResponse:  # noqa: N802
        if request.request_id and not request_id_var.get():
            request_id_var.set(request.request_id[:128])
        filters = request.filters
        outcome = await self.retriever.search(SearchInput(
            query=request.query,
            top_k=request.top_k,
            readable_corpora=tuple(request.readable_corpora),
            corpora=tuple(filters.corpora),
            library=filters.library,
            version=filters.version,
            tags=tuple(filters.tags),
            path_prefix=filters.path_prefix,
            include_content=request.include_content,
        ))
        fields = msgspec.structs.asdict(outcome)
        fields["results"] = [common_pb2.ScoredChunk(chunk=chunk_to_proto(r.chunk), scores=r.scores)
                             for r in outcome.results]
        return retrieval_pb2.SearchResponse(**fields)

    async def BatchGetChunks(self, request, context) -> retrieval_pb2.BatchGetChunksResponse:  # noqa: N802
        batch = await self.directory.batch_get(
            list(request.chunk_ids), request.index_version, list(request.readable_corpora), request.include_content
        )
        return retrieval_pb2.BatchGetChunksResponse(
            chunks=[chunk_to_proto(c) for c in batch.chunks], missing=batch.missing
        )

    async def ListCorpora(self, request, context) -> retrieval_pb2.ListCorporaResponse:  # noqa: N802
        corpora = await self.directory.list_corpora(list(request.readable_corpora),
                                                    all_corpora=request.all_corpora)
        return retrieval_pb2.ListCorporaResponse(
            corpora=[retrieval_pb2.CorpusInfo(**msgspec.structs.asdict(c)) for c in corpora]
        )

    async def HasSource(self, request, context) -> retrieval_pb2.HasSourceResponse:  # noqa: N802
        hit = await self.directory.has_source(request.corpus, request.source_path, list(request.readable_corpora))
        return retrieval_pb2.HasSourceResponse(found=hit.found, index_version=hit.index_version)

    async def Stats(self, request, context) -> retrieval_pb2.StatsResponse:  # noqa: N802
        stats = await self.directory.stats(list(request.readable_corpora))
        return retrieval_pb2.StatsResponse(**msgspec.structs.asdict(stats))


def chunk_to_proto(chunk: Chunk) -> common_pb2.Chunk:
    return common_pb2.Chunk(**chunk_values(chunk))
