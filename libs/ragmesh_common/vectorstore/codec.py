"""Port types <-> ``ragmesh.v1.VectorStore`` messages, shared by the gRPC adapter and the servicer."""

from __future__ import annotations

from typing import Any

import msgspec
from ragmesh.v1 import vectorstore_pb2

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import CollectionMeta
from ragmesh_common.vectorstore.port import (
    DEFAULT_CANDIDATES,
    DEFAULT_RRF_K,
    HybridQuery,
    PointFilter,
    ScoredHit,
    SparseVector,
    StoredPoint,
)

_payload_decoder = msgspec.json.Decoder(dict)
_meta_decoder = msgspec.json.Decoder(CollectionMeta)


def _put_vectors(message: Any, dense: list[float] | None, sparse: SparseVector | None) -> Any:
    """Writes the vectors into a Point or QueryRequest (both hold ``dense``, ``sparse_indices`` and
    ``sparse_values``); returns the message."""
    if dense is not None:
        message.dense.extend(dense)
    if sparse is not None:
        message.sparse_indices.extend(sparse.indices)
        message.sparse_values.extend(sparse.values)
    return message


def _vectors_of(message: Any) -> tuple[list[float] | None, SparseVector | None]:
    """The vectors of a Point or QueryRequest; INVALID_ARGUMENT when the sparse lists differ in length."""
    if len(message.sparse_indices) != len(message.sparse_values):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "sparse indices and values differ in length")
    # proto3 cannot tell an absent vector from an empty one; an empty vector is never valid anyway.
    sparse = None
    if message.sparse_indices:
        sparse = SparseVector(indices=list(message.sparse_indices), values=list(message.sparse_values))
    return list(message.dense) or None, sparse


def point_to_proto(point: StoredPoint) -> vectorstore_pb2.Point:
    message = vectorstore_pb2.Point(id=point.id, payload_json=msgspec.json.encode(point.payload))
    return _put_vectors(message, point.dense, point.sparse)


def point_from_proto(message: vectorstore_pb2.Point) -> StoredPoint:
    dense, sparse = _vectors_of(message)
    try:
        payload = _payload_decoder.decode(message.payload_json) if message.payload_json else {}
    except msgspec.DecodeError:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "point payload is not a JSON object") from None
    return StoredPoint(id=message.id, payload=payload, dense=dense, sparse=sparse)


def meta_to_json(meta: CollectionMeta) -> bytes:
    return msgspec.json.encode(meta)


def meta_from_json(data: bytes) -> CollectionMeta:
    try:
        return _meta_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "collection metadata is not a valid CollectionMeta") from None


def query_to_proto(query: HybridQuery) -> vectorstore_pb2.QueryRequest:
    f = query.filter
    message = vectorstore_pb2.QueryRequest(
        collection=query.collection,
        filter=vectorstore_pb2.PointFilter(corpora=list(f.corpora), library=f.library, version=f.version,
                                           tags=list(f.tags), path_prefix=f.path_prefix),
        limit=query.limit, candidates=query.candidates, rrf_k=query.rrf_k,
    )
    return _put_vectors(message, query.dense, query.sparse)


def query_from_proto(message: vectorstore_pb2.QueryRequest) -> HybridQuery:
    dense, sparse = _vectors_of(message)
    if message.limit < 1 or message.rrf_k < 0 or message.candidates < 0:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "query limit must be positive, candidates and rrf_k >= 0")
    f = message.filter
    return HybridQuery(
        collection=message.collection,
        filter=PointFilter(corpora=tuple(f.corpora), library=f.library, version=f.version,
                           tags=tuple(f.tags), path_prefix=f.path_prefix),
        limit=message.limit,
        dense=dense,
        sparse=sparse,
        candidates=message.candidates or DEFAULT_CANDIDATES,
        rrf_k=message.rrf_k or DEFAULT_RRF_K,
    )


def hit_to_proto(hit: ScoredHit) -> vectorstore_pb2.ScoredPoint:
    message = vectorstore_pb2.ScoredPoint(id=hit.id, fused=hit.fused, payload_json=msgspec.json.encode(hit.payload))
    if hit.dense is not None:
        message.dense = hit.dense
    if hit.sparse is not None:
        message.sparse = hit.sparse
    return message


def hit_from_proto(message: vectorstore_pb2.ScoredPoint) -> ScoredHit:
    return ScoredHit(
        id=message.id,
        fused=message.fused,
        payload=_payload_decoder.decode(message.payload_json) if message.payload_json else {},
        dense=message.dense if message.HasField("dense") else None,
        sparse=message.sparse if message.HasField("sparse") else None,
    )
