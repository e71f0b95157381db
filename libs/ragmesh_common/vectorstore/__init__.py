"""The vector-store port and its adapters (Qdrant via qdrant-client; Qdrant Edge in-process; the
retrieval service over gRPC).

Each is imported from its own module, so that importing the port pulls in no client library:
``from ragmesh_common.vectorstore.port import VectorStorePort, StoredPoint, HybridQuery``,
``from ragmesh_common.vectorstore.qdrant import QdrantVectorStore``,
``from ragmesh_common.vectorstore.edge import EdgeVectorStore``,
``from ragmesh_common.vectorstore.grpc_store import GrpcVectorStore``.
"""
