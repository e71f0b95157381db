"""The Qdrant adapter of the vector-store port: the only module that speaks qdrant-client.

It takes a ready client. ``AsyncQdrantClient(url=...)`` (a Qdrant server) is awaited directly.
A synchronous ``QdrantClient`` — the local mode, ``QdrantClient(path=...)`` or ``(":memory:")`` — runs
on one dedicated worker thread: local mode is pure Python (brute-force search, per-point payload
checks) and would otherwise block the event loop for the whole query (``AsyncQdrantLocal`` does
exactly that), and one thread also serialises writes against reads, which local mode needs.

Collection metadata (CollectionMeta) is stored as Qdrant collection metadata (``metadata=``), which
both local mode and Qdrant servers >= 1.16 keep; ``create_collection`` checks it was recorded.

On a server, every new collection takes the layout of ``VectorIndexConfig``: HNSW ``m`` and
``ef_construct``, segments indexed from about ``hnsw_min_points`` points on (the server builds the
graph in the background; smaller segments are searched exactly), optional int8 scalar quantization
rescored at query time, ``on_disk`` vectors and graph, and the cluster's ``shard_number``,
``replication_factor`` and ``write_consistency_factor``. A server can accept a replication factor
it cannot honour and create no replicas (qdrant/qdrant#5215), so the placement is read back: a
collection whose shards or replicas were not all placed is deleted again and the create fails with
INVALID_ARGUMENT ``reason: shards_unplaced``. Local mode has no graph or cluster: it ignores all this.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

import httpx
import msgspec
from qdrant_client import AsyncQdrantClient, QdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import DENSE, SPARSE, CollectionMeta
from ragmesh_common.vectorstore.fusion import cosines
from ragmesh_common.vectorstore.index_config import VectorIndexConfig
from ragmesh_common.vectorstore.port import (
    INDEXED_KEYWORDS,
    CollectionInfo,
    HybridQuery,
    PointFilter,
    ScoredHit,
    SparseVector,
    StoredPoint,
    VectorStorePort,
    keyword_conditions,
    point_from_record,
    rank_score,
    stored_payload,
)

log = logging.getLogger("ragmesh.vectorstore")


class QdrantVectorStore(VectorStorePort):
    def __init__(self, client: QdrantClient | AsyncQdrantClient, config: VectorIndexConfig | None = None, *,
                 fast_local_commits: bool = True) -> None:
        self.client = client
        self.config = config or VectorIndexConfig()
        self._async = isinstance(client, AsyncQdrantClient)
        self.local = type(getattr(client, "_client", None)).__name__ in ("QdrantLocal", "AsyncQdrantLocal")
        self.kind = "qdrant-local" if self.local else "qdrant-server"
        self._executor = None if self._async else ThreadPoolExecutor(1, thread_name_prefix="qdrant")
        self._fast_local_commits = fast_local_commits and self.local and not self._async
        self._tuned: set[str] = set()
        self._closed = False

    async def close(self) -> None:
        if self._closed:
            return
        await self._run(self.client.close)
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)

    # --- collections -------------------------------------------------------------------------

    async def create_collection(self, name: str, vector_size: int, metadata: CollectionMeta) -> None:
        if vector_size <= 0:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "vector size must be positive")
        if await self._run(self.client.collection_exists, name):
            raise RagmeshError(ErrorCode.CONFLICT, f"collection {name} already exists")
        recorded = msgspec.to_builtins(metadata)
        if self.local:
            await self._run(
                self.client.create_collection,
                name,
                vectors_config={DENSE: models.VectorParams(size=vector_size, distance=models.Distance.COSINE)},
                sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                metadata=recorded,
            )
            return
        try:
            await self._run(self.client.create_collection, name, metadata=recorded,
                            **server_collection_layout(vector_size, self.config))
        except RagmeshError as exc:
            if exc.code != ErrorCode.INVALID_ARGUMENT and not exc.details.get("said"):
                raise  # a conflict, or a server that cannot be reached: not about the layout
            raise self._layout_refused(name, exc.details.get("said") or exc.message) from None
        try:
            await self._require_placed(name)
            for key in INDEXED_KEYWORDS:
                await self._run(
                    self.client.create_payload_index, name, key, field_schema=models.PayloadSchemaType.KEYWORD
                )
            info = await self._run(self.client.get_collection, name)
            if not info.config.metadata:
                raise RagmeshError(
                    ErrorCode.UNAVAILABLE, "the Qdrant server dropped collection metadata; it needs Qdrant >= 1.16"
                )
        except BaseException:
            # A half-made collection would hold the name of the next try.
            try:
                await self._run(self.client.delete_collection, name)
            except RagmeshError:
                log.warning("could not delete a half-created collection", extra={"fields": {"collection": name}})
            raise

    async def _require_placed(self, name: str) -> None:
        """Every shard replica asked for exists and is active, or INVALID_ARGUMENT."""
        wanted = self.config.shard_number * self.config.replication_factor
        if wanted == 1:
            return
        cluster = await self._run(self.client.collection_cluster_info, name)
        replicas = [*cluster.local_shards, *cluster.remote_shards]
        placed = sum(1 for r in replicas if str(getattr(r.state, "value", r.state)).lower() == "active")
        shards = len({r.shard_id for r in replicas})
        if placed < wanted or shards < self.config.shard_number:
            raise self._layout_refused(
                name, f"{shards} shard(s) and {placed} active replica(s) were placed, {wanted} were asked for",
                placed=placed)

    def _layout_refused(self, name: str, why: str, *, placed: int | None = None) -> RagmeshError:
        config = self.config
        details = {"reason": "shards_unplaced", "collection": name, "shard_number": config.shard_number,
                   "replication_factor": config.replication_factor,
                   "write_consistency_factor": config.write_consistency_factor}
        if placed is not None:
            details["placed"] = placed
        log.error("collection layout refused", extra={"fields": details | {"why": why[:200]}})
        return RagmeshError(
            ErrorCode.INVALID_ARGUMENT,
            f"the Qdrant server could not create collection {name} with RAGMESH_QDRANT_SHARD_NUMBER="
            f"{config.shard_number}, RAGMESH_QDRANT_REPLICATION_FACTOR={config.replication_factor}, "
            f"RAGMESH_QDRANT_WRITE_CONSISTENCY_FACTOR={config.write_consistency_factor} (and the HNSW / "
            f"quantization settings): {why}. Nothing was created; lower them to what the cluster's nodes "
            "can hold, or add nodes",
            details,
        )

    async def delete_collection(self, name: str) -> bool:
        self._tuned.discard(name)
        return bool(await self._run(self.client.delete_collection, name))

    async def list_collections(self) -> list[str]:
        response = await self._run(self.client.get_collections)
        return sorted(c.name for c in response.collections)

    async def get_collection(self, name: str) -> CollectionInfo:
        try:
            info = await self._run(self.client.get_collection, name)
        except RagmeshError as exc:
            if exc.code == ErrorCode.NOT_FOUND:
                return CollectionInfo(exists=False)
            raise
        raw = info.config.metadata
        metadata = None
        if raw:
            try:
                metadata = msgspec.convert(raw, CollectionMeta)
            except msgspec.ValidationError:
                log.warning("collection metadata unreadable", extra={"fields": {"collection": name}})
        return CollectionInfo(exists=True, metadata=metadata, points=int(info.points_count or 0))

    async def count(self, name: str) -> int:
        return int((await self._run(self.client.count, name, exact=True)).count)

    # --- aliases -----------------------------------------------------------------------------

    async def set_alias(self, alias: str, collection: str | None) -> None:
        operations: list[Any] = []
        if alias in await self.get_aliases():
            operations.append(models.DeleteAliasOperation(delete_alias=models.DeleteAlias(alias_name=alias)))
        if collection:
            if not await self._run(self.client.collection_exists, collection):
                raise RagmeshError(ErrorCode.NOT_FOUND, f"collection {collection} does not exist")
            operations.append(
                models.CreateAliasOperation(
                    create_alias=models.CreateAlias(collection_name=collection, alias_name=alias)
                )
            )
        if operations:
            # Delete + create in one request: readers see the old or the new target, never none.
            await self._run(self.client.update_collection_aliases, change_aliases_operations=operations)

    async def get_aliases(self) -> dict[str, str]:
        response = await self._run(self.client.get_aliases)
        return {a.alias_name: a.collection_name for a in response.aliases}

    # --- points ------------------------------------------------------------------------------

    async def _write(self, name: str, points: Sequence[StoredPoint]) -> None:
        structs = [_to_point_struct(point) for point in points]
        if self._fast_local_commits and name not in self._tuned:
            await self._run(self._tune_local_storage, name)
        await self._run(self.client.upsert, name, structs)

    async def _page(self, name: str, offset: str | None, limit: int, with_vectors: bool
                    ) -> tuple[list[StoredPoint], str | None]:
        records, next_offset = await self._run(
            self.client.scroll, name, limit=limit, offset=offset, with_payload=True, with_vectors=with_vectors
        )
        return [point_from_record(r) for r in records], (str(next_offset) if next_offset is not None else None)

    async def _retrieve(self, name: str, ids: list[str], with_vectors: bool) -> list[StoredPoint]:
        records = await self._run(self.client.retrieve, name, ids, with_payload=True, with_vectors=with_vectors)
        return [point_from_record(r) for r in records]

    async def hybrid_query(self, query: HybridQuery) -> list[ScoredHit]:
        point_filter = build_filter(query.filter)
        sparse = _sparse_model(query.sparse) if query.sparse is not None and query.sparse.indices else None
        dense = query.dense
        if dense is not None and sparse is not None:
            candidates = max(query.candidates, query.limit)
            # The filter sits in each prefetch: fusion only reorders what the prefetches returned,
            # and a second top-level filter would make local mode check every point twice.
            response = await self._run(
                self.client.query_points,
                query.collection,
                prefetch=[
                    models.Prefetch(query=dense, using=DENSE, limit=candidates, filter=point_filter,
                                    params=self._dense_params(candidates)),
                    models.Prefetch(query=sparse, using=SPARSE, limit=candidates, filter=point_filter),
                ],
                query=models.RrfQuery(rrf=models.Rrf(k=query.rrf_k)),
                limit=query.limit,
                with_payload=True,
                with_vectors=[DENSE],
            )
            bm25 = await self._sparse_scores(query.collection, sparse, point_filter,
                                             [str(p.id) for p in response.points])
            return _fused_hits(response.points, dense, bm25)
        if dense is None and sparse is None:
            return []
        using, vector = (DENSE, dense) if dense is not None else (SPARSE, sparse)
        response = await self._run(
            self.client.query_points,
            query.collection,
            query=vector,
            using=using,
            query_filter=point_filter,
            limit=query.limit,
            with_payload=True,
            search_params=self._dense_params(query.limit) if using == DENSE else None,
        )
        return [
            ScoredHit(
                id=str(p.id),
                fused=rank_score(rank, query.rrf_k),
                payload=p.payload or {},
                dense=float(p.score) if using == DENSE else None,
                sparse=float(p.score) if using == SPARSE else None,
            )
            for rank, p in enumerate(response.points)
        ]

    async def _sparse_scores(self, collection: str, sparse: models.SparseVector, point_filter: models.Filter,
                             ids: list[str]) -> dict[str, float]:
        """The fused hits' BM25 scores: RRF returns only ranks, so one sparse query restricted to
        their ids. An id it does not return shares no term with the query (BM25 0.0)."""
        if not ids:
            return {}
        only = models.Filter(must=[point_filter, models.HasIdCondition(has_id=ids)])
        response = await self._run(self.client.query_points, collection, query=sparse, using=SPARSE,
                                   query_filter=only, limit=len(ids), with_payload=False)
        return {str(p.id): float(p.score) for p in response.points}

    def _dense_params(self, limit: int) -> models.SearchParams | None:
        """The server's graph and quantization at query time; local mode searches exactly anyway."""
        if self.local:
            return None
        quantization = None
        if self.config.quantized:
            quantization = models.QuantizationSearchParams(rescore=self.config.rescore,
                                                           oversampling=self.config.oversampling)
        return models.SearchParams(hnsw_ef=max(self.config.hnsw_ef, limit), quantization=quantization)

    # --- plumbing ----------------------------------------------------------------------------

    async def _run(self, method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise RagmeshError(ErrorCode.UNAVAILABLE, "vector store is closed")
        try:
            if self._async:
                return await method(*args, **kwargs)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._executor, lambda: method(*args, **kwargs))
        except RagmeshError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated to the taxonomy right here
            raise _translate(exc) from None

    def _tune_local_storage(self, name: str) -> None:
        """WAL + synchronous=NORMAL on the collection's SQLite file: local mode commits every point
        on its own, and a full fsync per point makes upserts ~4x slower. A process crash loses
        nothing; an OS crash may lose the last commits of a build, which is rebuilt anyway (the alias
        only moves after the build is verified). Reaches into qdrant-client's private attributes, so
        any surprise just leaves the defaults."""
        self._tuned.add(name)
        try:
            storage = self.client._client.collections[name].storage  # type: ignore[union-attr]
            if storage is None:  # ":memory:"
                return
            storage.storage.execute("PRAGMA journal_mode=WAL")
            storage.storage.execute("PRAGMA synchronous=NORMAL")
        except (AttributeError, KeyError, sqlite3.Error):
            log.info("local storage tuning skipped", extra={"fields": {"collection": name}})


def server_collection_layout(vector_size: int, config: VectorIndexConfig) -> dict[str, Any]:
    """``create_collection`` keyword arguments of a server collection, from the settings.

    The server indexes a segment once its vectors pass ``indexing_threshold`` KB: the HNSW size in
    points at this vector size. ``payload_m=0``: no extra per-payload-value graphs (one corpus per
    collection, so the ACL filter matches all of it)."""
    quantization = None
    if config.quantized:
        quantization = models.ScalarQuantization(scalar=models.ScalarQuantizationConfig(
            type=models.ScalarType.INT8, quantile=0.99, always_ram=True))
    return {
        "vectors_config": {DENSE: models.VectorParams(size=vector_size, distance=models.Distance.COSINE,
                                                      on_disk=config.on_disk or None)},
        "sparse_vectors_config": {SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
        "shard_number": config.shard_number,
        "replication_factor": config.replication_factor,
        "write_consistency_factor": config.write_consistency_factor,
        "hnsw_config": models.HnswConfigDiff(m=config.hnsw_m, ef_construct=config.hnsw_ef_construct, payload_m=0,
                                             on_disk=config.on_disk or None),
        "optimizers_config": models.OptimizersConfigDiff(
            indexing_threshold=max(1, config.hnsw_min_points * vector_size * 4 // 1024)),
        "quantization_config": quantization,
    }


def build_filter(point_filter: PointFilter) -> models.Filter:
    """The port's ``keyword_conditions`` in qdrant-client's types."""
    must: list[models.Condition] = [
        models.FieldCondition(
            key=key, match=models.MatchAny(any=value) if isinstance(value, list) else models.MatchValue(value=value)
        )
        for key, value in keyword_conditions(point_filter)
    ]
    return models.Filter(must=must)


def _to_point_struct(point: StoredPoint) -> models.PointStruct:
    vector: dict[str, Any] = {}
    if point.dense is not None:
        vector[DENSE] = list(point.dense)
    if point.sparse is not None:
        vector[SPARSE] = _sparse_model(point.sparse)
    return models.PointStruct(id=point.id, vector=vector, payload=stored_payload(point))


def _sparse_model(sparse: SparseVector) -> models.SparseVector:
    return models.SparseVector(indices=list(sparse.indices), values=list(sparse.values))


def _fused_hits(points: list[Any], query_vector: list[float], bm25: dict[str, float]) -> list[ScoredHit]:
    """The fused points as hits, each with the cosine of its stored dense vector (one matrix product
    for all of them: fusion.cosines; the embedded store has its engine score them, to 1e-7 the same)."""
    stored = [(point.vector if isinstance(point.vector, dict) else {}).get(DENSE) for point in points]
    scored = iter(cosines(query_vector, [vector for vector in stored if vector is not None]))
    return [
        ScoredHit(
            id=str(point.id),
            fused=float(point.score),
            payload=point.payload or {},
            dense=next(scored) if vector is not None else None,
            sparse=bm25.get(str(point.id), 0.0),
        )
        for point, vector in zip(points, stored)
    ]


def _server_says(exc: UnexpectedResponse) -> str:
    """The server's own error text (``status.error``), short; it names settings, never documents."""
    try:
        said = exc.structured()["status"]["error"]
    except Exception:  # noqa: BLE001 - an unparseable body just says nothing
        return ""
    return str(said)[:300]


def _translate(exc: Exception) -> RagmeshError:
    text = str(exc)
    if isinstance(exc, UnexpectedResponse):
        status = exc.status_code
        if status == 404:
            return RagmeshError(ErrorCode.NOT_FOUND, "collection not found")
        if status == 409:
            return RagmeshError(ErrorCode.CONFLICT, "vector store conflict")
        # The server's reason rides in details (for a caller that knows the request, like a create);
        # the message stays generic.
        said = {"said": _server_says(exc)}
        if status in (400, 422):
            log.warning("vector store rejected a request", extra={"fields": {"status": status, **said}})
            return RagmeshError(ErrorCode.INVALID_ARGUMENT, "vector store rejected the request", said)
        return RagmeshError(ErrorCode.UNAVAILABLE, f"vector store answered {status}", said)
    if isinstance(exc, (ResponseHandlingException, httpx.HTTPError, ConnectionError, TimeoutError)):
        return RagmeshError(ErrorCode.UNAVAILABLE, "vector store unreachable")
    if isinstance(exc, ValueError) and "not found" in text:
        return RagmeshError(ErrorCode.NOT_FOUND, "collection not found")
    if isinstance(exc, ValueError) and "already exists" in text:
        return RagmeshError(ErrorCode.CONFLICT, "collection or alias already exists")
    if isinstance(exc, RuntimeError) and "closed" in text:
        return RagmeshError(ErrorCode.UNAVAILABLE, "vector store is closed")
    if type(exc).__name__ in ("AioRpcError", "_InactiveRpcError"):  # prefer_grpc clients
        return RagmeshError(ErrorCode.UNAVAILABLE, "vector store unreachable")
    if isinstance(exc, ValueError):
        log.warning("vector store rejected a request", extra={"fields": {"error": text[:200]}})
        return RagmeshError(ErrorCode.INVALID_ARGUMENT, "vector store rejected the request")
    log.exception("vector store failed")
    return RagmeshError(ErrorCode.INTERNAL, "vector store failed")
