"""protobuf <-> gateway domain types; the only place that knows both."""

from __future__ import annotations

from ragmesh.v1 import common_pb2

from ragmesh_gateway.search.models import Chunk, Filters, ScoredChunk


def chunk_from_pb(pb: common_pb2.Chunk) -> Chunk:
    return Chunk(
        chunk_id=pb.chunk_id,
        parent_id=pb.parent_id,
        doc_id=pb.doc_id,
        corpus=pb.corpus,
        library=pb.library,
        version=pb.version,
        title=pb.title,
        heading_path=tuple(pb.heading_path),
        url=pb.url,
        quote=pb.quote,
        content=pb.content,
        source_path=pb.source_path,
        line_start=pb.line_start,
        line_end=pb.line_end,
        page=pb.page,
        tags=tuple(pb.tags),
        download_path=pb.download_path,
        index_version=pb.index_version,
    )


def chunk_to_pb(chunk: Chunk) -> common_pb2.Chunk:
    return common_pb2.Chunk(
        chunk_id=chunk.chunk_id,
        parent_id=chunk.parent_id,
        doc_id=chunk.doc_id,
        corpus=chunk.corpus,
        library=chunk.library,
        version=chunk.version,
        title=chunk.title,
        heading_path=list(chunk.heading_path),
        url=chunk.url,
        quote=chunk.quote,
        content=chunk.content,
        source_path=chunk.source_path,
        line_start=chunk.line_start,
        line_end=chunk.line_end,
        page=chunk.page,
        tags=list(chunk.tags),
        download_path=chunk.download_path,
        index_version=chunk.index_version,
    )


def scored_from_pb(pb: common_pb2.ScoredChunk) -> ScoredChunk:
    return ScoredChunk(chunk=chunk_from_pb(pb.chunk), scores=dict(pb.scores))


def filters_to_pb(filters: Filters) -> common_pb2.SearchFilters:
    return common_pb2.SearchFilters(
        corpora=list(filters.corpora),
        library=filters.library,
        version=filters.version,
        tags=list(filters.tags),
        path_prefix=filters.path_prefix,
    )
