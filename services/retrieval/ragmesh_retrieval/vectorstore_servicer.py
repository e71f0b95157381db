"""``ragmesh.v1.VectorStore``: the vector-store port served to the indexer in the embedded default.

Every change to collections or aliases made here invalidates the search catalog at once, so a new
index version serves from the next search on.
"""

from __future__ import annotations

import re

from ragmesh.v1 import vectorstore_pb2, vectorstore_pb2_grpc

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.vectorstore.codec import (
    hit_to_proto,
    meta_from_json,
    meta_to_json,
    point_from_proto,
    point_to_proto,
    query_from_proto,
)
from ragmesh_common.vectorstore.port import VectorStorePort

from ragmesh_retrieval.domain.catalog import CorpusCatalog

MAX_SCROLL_LIMIT = 1024
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,255}$")


class VectorStoreServicer(vectorstore_pb2_grpc.VectorStoreServicer):
    def __init__(self, store: VectorStorePort, catalog: CorpusCatalog) -> None:
        self.store = store
        self.catalog = catalog

    async def CreateCollection(self, request, context) -> vectorstore_pb2.StoreAck:  # noqa: N802
        _require_name(request.collection)
        await self.store.create_collection(request.collection, request.vector_size, meta_from_json(request.metadata_json))
        self.catalog.invalidate()
        return vectorstore_pb2.StoreAck(ok=True)

    async def DeleteCollection(self, request, context) -> vectorstore_pb2.StoreAck:  # noqa: N802
        _require_name(request.collection)
        deleted = await self.store.delete_collection(request.collection)
        self.catalog.invalidate()
        return vectorstore_pb2.StoreAck(ok=deleted)

    async def ListCollections(self, request, context) -> vectorstore_pb2.ListCollectionsResponse:  # noqa: N802
        return vectorstore_pb2.ListCollectionsResponse(collections=await self.store.list_collections())

    async def Upsert(self, request, context) -> vectorstore_pb2.StoreAck:  # noqa: N802
        _require_name(request.collection)
        await self.store.upsert(request.collection, [point_from_proto(p) for p in request.points])
        return vectorstore_pb2.StoreAck(ok=True)

    async def Scroll(self, request, context) -> vectorstore_pb2.ScrollResponse:  # noqa: N802
        _require_name(request.collection)
        limit = request.limit or 256
        if not 0 < limit <= MAX_SCROLL_LIMIT:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"scroll limit must be 1..{MAX_SCROLL_LIMIT}")
        points, next_offset = await self.store.scroll(
            request.collection,
            offset=request.offset or None,
            limit=limit,
            with_vectors=request.with_vectors,
            ids=list(request.ids) if request.ids else None,
        )
        return vectorstore_pb2.ScrollResponse(
            points=[point_to_proto(p) for p in points], next_offset=next_offset or ""
        )

    async def Count(self, request, context) -> vectorstore_pb2.CountResponse:  # noqa: N802
        _require_name(request.collection)
        return vectorstore_pb2.CountResponse(count=await self.store.count(request.collection))

    async def GetCollection(self, request, context) -> vectorstore_pb2.CollectionInfoResponse:  # noqa: N802
        _require_name(request.collection)
        info = await self.store.get_collection(request.collection)
        return vectorstore_pb2.CollectionInfoResponse(
            exists=info.exists,
            metadata_json=meta_to_json(info.metadata) if info.metadata is not None else b"",
            points=info.points,
        )

    async def SetAlias(self, request, context) -> vectorstore_pb2.StoreAck:  # noqa: N802
        _require_name(request.alias)
        await self.store.set_alias(request.alias, request.collection or None)
        self.catalog.invalidate()
        return vectorstore_pb2.StoreAck(ok=True)

    async def GetAliases(self, request, context) -> vectorstore_pb2.GetAliasesResponse:  # noqa: N802
        aliases = await self.store.get_aliases()
        return vectorstore_pb2.GetAliasesResponse(
            aliases=[vectorstore_pb2.AliasEntry(alias=a, collection=c) for a, c in sorted(aliases.items())]
        )

    async def Query(self, request, context) -> vectorstore_pb2.QueryResponse:  # noqa: N802
        _require_name(request.collection)
        hits = await self.store.hybrid_query(query_from_proto(request))
        return vectorstore_pb2.QueryResponse(points=[hit_to_proto(h) for h in hits])


def _require_name(name: str) -> None:
    if not _NAME.match(name):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "collection or alias name is malformed")
