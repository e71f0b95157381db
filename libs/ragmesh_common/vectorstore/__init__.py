"""The vector-store port and its adapters (Qdrant via qdrant-client; Qdrant Edge in-process; the
retrieval service over gRPC).

Adapters are imported from their modules so that importing the port pulls in no client library:
``from ragmesh_common.vectorstore.qdrant import QdrantVectorStore``,
``from ragmesh_common.vectorstore.edge import EdgeVectorStore``,
``from ragmesh_common.vectorstore.grpc_store import GrpcVectorStore``.
"""

from ragmesh_common.vectorstore.port import (
    PATH_PREFIXES_KEY,
    CollectionInfo,
    HybridQuery,
    PointFilter,
    ScoredHit,
    SparseVector,
    StoredPoint,
    VectorStorePort,
)

__all__ = [
    "PATH_PREFIXES_KEY",
    "CollectionInfo",
    "HybridQuery",
    "PointFilter",
    "ScoredHit",
    "SparseVector",
    "StoredPoint",
    "VectorStorePort",
]
