"""The vector-store port over ``ragmesh.v1.VectorStore``: how the indexer writes in the embedded
default, where the retrieval process owns qdrant-client's local storage (only one process may open
it). Against a Qdrant server the indexer uses QdrantVectorStore directly instead.
"""

from __future__ import annotations

from typing import Sequence

import grpc
from ragmesh.v1 import vectorstore_pb2, vectorstore_pb2_grpc

from ragmesh_common.index_schema import CollectionMeta
from ragmesh_common.rpc.client import unary
from ragmesh_common.vectorstore.codec import (
    hit_from_proto,
    meta_from_json,
    meta_to_json,
    point_from_proto,
    point_to_proto,
    query_to_proto,
)
from ragmesh_common.vectorstore.port import (
    CollectionInfo,
    HybridQuery,
    ScoredHit,
    StoredPoint,
    VectorStorePort,
)

PEER = "retrieval vector store"


class GrpcVectorStore(VectorStorePort):
    kind = "qdrant-local"

    def __init__(self, channel: grpc.aio.Channel, *, timeout: float = 30.0, write_timeout: float = 120.0) -> None:
        self.stub = vectorstore_pb2_grpc.VectorStoreStub(channel)
        self.timeout = timeout
        self.write_timeout = write_timeout

    async def create_collection(self, name: str, vector_size: int, metadata: CollectionMeta) -> None:
        request = vectorstore_pb2.CreateCollectionRequest(
            collection=name, vector_size=vector_size, metadata_json=meta_to_json(metadata)
        )
        await self._call(self.stub.CreateCollection, request)

    async def delete_collection(self, name: str) -> bool:
        ack = await self._call(self.stub.DeleteCollection, vectorstore_pb2.CollectionRef(collection=name))
        return bool(ack.ok)

    async def list_collections(self) -> list[str]:
        reply = await self._call(self.stub.ListCollections, vectorstore_pb2.ListCollectionsRequest())
        return list(reply.collections)

    async def _write(self, name: str, points: Sequence[StoredPoint]) -> None:
        request = vectorstore_pb2.UpsertRequest(collection=name, points=[point_to_proto(p) for p in points])
        await self._call(self.stub.Upsert, request, timeout=self.write_timeout)

    async def _page(self, name: str, offset: str | None, limit: int, with_vectors: bool
                    ) -> tuple[list[StoredPoint], str | None]:
        request = vectorstore_pb2.ScrollRequest(collection=name, offset=offset or "", limit=limit,
                                                with_vectors=with_vectors)
        reply = await self._call(self.stub.Scroll, request)
        return [point_from_proto(p) for p in reply.points], (reply.next_offset or None)

    async def _retrieve(self, name: str, ids: list[str], with_vectors: bool) -> list[StoredPoint]:
        request = vectorstore_pb2.ScrollRequest(collection=name, with_vectors=with_vectors, ids=ids)
        reply = await self._call(self.stub.Scroll, request)
        return [point_from_proto(p) for p in reply.points]

    async def count(self, name: str) -> int:
        reply = await self._call(self.stub.Count, vectorstore_pb2.CollectionRef(collection=name))
        return int(reply.count)

    async def get_collection(self, name: str) -> CollectionInfo:
        reply = await self._call(self.stub.GetCollection, vectorstore_pb2.CollectionRef(collection=name))
        if not reply.exists:
            return CollectionInfo(exists=False)
        metadata = meta_from_json(reply.metadata_json) if reply.metadata_json else None
        return CollectionInfo(exists=True, metadata=metadata, points=int(reply.points))

    async def set_alias(self, alias: str, collection: str | None) -> None:
        request = vectorstore_pb2.SetAliasRequest(alias=alias, collection=collection or "")
        await self._call(self.stub.SetAlias, request)

    async def get_aliases(self) -> dict[str, str]:
        reply = await self._call(self.stub.GetAliases, vectorstore_pb2.GetAliasesRequest())
        return {entry.alias: entry.collection for entry in reply.aliases}

    async def hybrid_query(self, query: HybridQuery) -> list[ScoredHit]:
        reply = await self._call(self.stub.Query, query_to_proto(query))
        return [hit_from_proto(p) for p in reply.points]

    async def _call(self, method, request, *, timeout: float | None = None):  # type: ignore[no-untyped-def]
        return await unary(method, request, timeout=timeout or self.timeout, peer=PEER)
