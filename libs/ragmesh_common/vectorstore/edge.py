"""The Qdrant Edge adapter of the vector-store port: Qdrant's engine inside this process.

``qdrant-edge-py`` runs Qdrant's Rust segments in-process: the same payload indexes, sparse IDF and
SIMD distance code as a Qdrant server, with no server. An edge shard has no name, aliases or
metadata; :class:`~ragmesh_common.vectorstore.edge_catalog.EdgeCatalog` keeps those in one JSON
file under the root, one shard folder per collection.

Semantics are QdrantVectorStore's over local mode, float for float where the port exposes scores:

- dense search is exact (``SearchParams(exact=True)``), as local mode's brute force is, below
  ``VectorIndexConfig.hnsw_min_points``; in Rust that costs ~2-3 ms at 12k points of 384 dims and
  grows linearly. A collection that size or larger gets Qdrant's HNSW graph (optionally over int8
  scalar-quantized vectors, rescored on the originals), built by ``build_index`` — which an alias
  swap starts in the background — on a thread of its own, while searches go on (exactly, over the
  segments not yet indexed). bench/scale.py measures both sides;
- hybrid: the dense and the BM25 candidate lists (each with the full filter) come from one
  ``query_batch``; RRF runs here with qdrant-client's formula and tie order, so ``fused`` equals
  local mode's; ``dense`` is the exact search's cosine, or for a hit from the BM25 list alone the
  cosine recomputed from its stored vector, as QdrantVectorStore does for every hit (equal to 1e-6);
- sparse scores use the engine's IDF modifier over the whole collection, as local mode does; every
  fused hit carries its BM25 score (one more sparse query over the ids the BM25 list lacked).

Every engine call but the index build runs on one worker thread: the engine releases the GIL while
it searches, and one thread orders writes before the reads that follow them.

The engine memory-maps its files: a disk that fills up under a mapping kills the whole process
(SIGBUS), the active index with it. So every write, and every index build, first checks that the
disk keeps ``min_free_mb`` free after it (counting the holes of sparse files the engine has already
sized), and is refused with UNAVAILABLE ``reason: disk_full`` otherwise.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import shutil
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Sequence

import msgspec
import qdrant_edge as qe

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import DENSE, SPARSE, CollectionMeta
from ragmesh_common.vectorstore.edge_catalog import EdgeCatalog
from ragmesh_common.vectorstore.fusion import reciprocal_rank_fusion
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

log = logging.getLogger("ragmesh.vectorstore.edge")
_EXACT = qe.SearchParams(exact=True)
_MB = 1024 * 1024
# Qdrant's own default: a filter matching fewer points than this many KB of vectors is answered by
# scoring those points exactly (payload index first) rather than walking the graph.
_FULL_SCAN_KB = 10_000
# What a new shard's files are sized to before any point is written (qdrant-edge 0.9.0: two 32 MB
# WAL segments, 32 MB first pages of the payload and BM25 storages, 4 MB per keyword index, ...),
# sparse at first and filled as points arrive.
_NEW_SHARD_BYTES = 176 * _MB


def free_disk_bytes(path: Path) -> int:
    return shutil.disk_usage(path).free


class EdgeVectorStore(VectorStorePort):
    """Opens (or creates) the store at ``root``; UNAVAILABLE if another process has it open.

    ``free_bytes`` tells the free space of the disk under a path (tests pass a fake one)."""

    kind = "qdrant-edge"

    def __init__(self, root: str | Path, config: VectorIndexConfig | None = None, *,
                 free_bytes: Callable[[Path], int] = free_disk_bytes) -> None:
        self.root = Path(root)
        self.config = config or VectorIndexConfig()
        self._free_bytes = free_bytes
        self._catalog = EdgeCatalog(self.root)
        self._shards: dict[str, qe.EdgeShard] = {}
        self._points: dict[str, int] = {}  # per collection, refreshed by every write
        self._builds: dict[str, Future] = {}  # index builds running or done, per collection
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="qdrant-edge")
        # Index builds run beside the worker: searches go on while a graph is built.
        self._indexer = ThreadPoolExecutor(1, thread_name_prefix="qdrant-edge-index")
        self._closed = False

    async def close(self) -> None:
        if self._closed:
            return
        await asyncio.gather(*(asyncio.wrap_future(f) for f in self._builds.values()), return_exceptions=True)
        await self._run(self._close_all)
        self._closed = True
        self._executor.shutdown(wait=True)
        self._indexer.shutdown(wait=True)

    # --- collections -------------------------------------------------------------------------

    async def create_collection(self, name: str, vector_size: int, metadata: CollectionMeta) -> None:
        if vector_size <= 0:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "vector size must be positive")
        await self._run(self._create, name, vector_size, msgspec.to_builtins(metadata))

    async def delete_collection(self, name: str) -> bool:
        build = self._builds.pop(name, None)
        if build is not None:  # a shard is never closed under its own index build
            await asyncio.gather(asyncio.wrap_future(build), return_exceptions=True)
        return await self._run(self._delete, name)

    async def build_index(self, name: str) -> bool:
        """Builds the HNSW graph of a collection of at least ``hnsw_min_points`` points (blocking
        until done; searches go on meanwhile). False when the collection stays exact."""
        collection = await self._run(self._catalog.resolve, name)
        points = await self.count(collection)
        if not self.config.uses_hnsw(points):
            return False
        build = self._builds.get(collection)
        if build is None or (build.done() and build.exception() is not None):
            build = self._start_build(collection)
        try:
            await asyncio.wrap_future(build)
        except RagmeshError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated to the taxonomy right here
            raise _translate(exc) from None
        return True

    def index_building(self, name: str) -> bool:
        build = self._builds.get(name)
        return build is not None and not build.done()

    async def list_collections(self) -> list[str]:
        return await self._run(lambda: sorted(self._catalog.state.collections))

    async def get_collection(self, name: str) -> CollectionInfo:
        return await self._run(self._info, name)

    async def count(self, name: str) -> int:
        return await self._run(lambda: self._shard(name).count(qe.CountRequest(exact=True)))

    # --- aliases -----------------------------------------------------------------------------

    async def set_alias(self, alias: str, collection: str | None) -> None:
        await self._run(self._set_alias, alias, collection)
        if collection is not None and collection not in self._builds:
            # What an alias serves gets its graph, in the background: searches stay exact meanwhile.
            if self.config.uses_hnsw(await self.count(collection)):
                self._start_build(collection)

    async def get_aliases(self) -> dict[str, str]:
        return await self._run(lambda: dict(self._catalog.state.aliases))

    # --- points ------------------------------------------------------------------------------

    async def _write(self, name: str, points: Sequence[StoredPoint]) -> None:
        await self._run(self._upsert, name, points)

    async def _page(self, name: str, offset: str | None, limit: int, with_vectors: bool
                    ) -> tuple[list[StoredPoint], str | None]:
        return await self._run(self._scroll, name, offset, limit, with_vectors)

    async def _retrieve(self, name: str, ids: list[str], with_vectors: bool) -> list[StoredPoint]:
        return await self._run(self._retrieve_found, name, ids, with_vectors)

    async def hybrid_query(self, query: HybridQuery) -> list[ScoredHit]:
        point_filter = build_edge_filter(query.filter)
        if query.dense is None and (query.sparse is None or not query.sparse.indices):
            return []
        return await self._run(self._query, query, point_filter)

    # --- engine side (the worker thread) -----------------------------------------------------

    def _shard(self, name: str) -> qe.EdgeShard:
        collection = self._catalog.resolve(name)
        shard = self._shards.get(collection)
        if shard is None:
            shard = qe.EdgeShard.load(str(self._catalog.shard_path(collection)))
            self._shards[collection] = shard
            self._points[collection] = int(shard.info().points_count)
        return shard

    def _create(self, name: str, vector_size: int, metadata: dict[str, Any]) -> None:
        state = self._catalog.state
        if name in state.collections or name in state.aliases:
            raise RagmeshError(ErrorCode.CONFLICT, f"collection {name} already exists")
        self._require_space(_NEW_SHARD_BYTES)
        folder = self._catalog.new_folder()
        config = edge_config(vector_size, self.config)
        shard = None
        try:
            shard = qe.EdgeShard.create(str(folder), config)
            for key in INDEXED_KEYWORDS:
                shard.update(qe.UpdateOperation.create_field_index(key, qe.PayloadSchemaType.Keyword))
            shard.flush()
            self._catalog.add_collection(name, folder, vector_size, metadata)
        except BaseException:
            if shard is not None:
                shard.close()
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self._shards[name] = shard
        self._points[name] = 0

    def _upsert(self, name: str, points: Sequence[StoredPoint]) -> None:
        shard = self._shard(name)
        edge_points = [_to_edge_point(point) for point in points]
        collection = self._catalog.resolve(name)
        self._require_space(_write_bytes(points), self._catalog.shard_path(collection))
        shard.update(qe.UpdateOperation.upsert_points(edge_points))
        self._points[collection] = int(shard.info().points_count)

    def _require_space(self, incoming: int, folder: Path | None = None) -> None:
        """UNAVAILABLE (disk_full) unless the disk keeps ``min_free_mb`` after ``incoming`` more
        bytes and after the engine fills the files it has already sized (their holes)."""
        free = self._free_bytes(self.root)
        needed = incoming + _hole_bytes(folder) + self.config.min_free_mb * _MB
        if free < needed:
            log.error("vector store disk full", extra={"fields": {"root": str(self.root), "free_mb": free // _MB,
                                                                   "needed_mb": -(-needed // _MB)}})
            raise RagmeshError(
                ErrorCode.UNAVAILABLE,
                f"the vector store's disk is full: {free // _MB} MB free under {self.root}, this write needs "
                f"{-(-needed // _MB)} MB (with RAGMESH_EDGE_MIN_FREE_MB={self.config.min_free_mb} kept free); "
                "nothing was written",
                {"reason": "disk_full", "free_mb": free // _MB, "needed_mb": -(-needed // _MB)},
            )

    def _start_build(self, collection: str) -> Future:
        build = self._indexer.submit(self._optimize, collection)
        self._builds[collection] = build
        build.add_done_callback(lambda f: _log_build(collection, f))
        return build

    def _optimize(self, collection: str) -> None:
        """On the indexing thread. The engine writes the indexed segments beside the old ones before
        it drops them: the disk must hold the shard a second time, graph included."""
        folder = self._catalog.shard_path(collection)
        self._require_space(_used_bytes(folder), folder)
        shard = self._shards.get(collection)
        if shard is None:
            raise RagmeshError(ErrorCode.NOT_FOUND, "collection not found")
        shard.optimize()

    def _delete(self, name: str) -> bool:
        folder = self._catalog.remove_collection(name)
        if folder is None:
            return False
        self._points.pop(name, None)
        shard = self._shards.pop(name, None)
        if shard is not None:
            shard.close()
        shutil.rmtree(folder, ignore_errors=True)
        return True

    def _info(self, name: str) -> CollectionInfo:
        try:
            collection = self._catalog.resolve(name)
        except RagmeshError:
            return CollectionInfo(exists=False)
        raw = self._catalog.entry(collection).metadata
        metadata = None
        if raw:
            try:
                metadata = msgspec.convert(raw, CollectionMeta)
            except msgspec.ValidationError:
                log.warning("collection metadata unreadable", extra={"fields": {"collection": name}})
        points = self._shard(collection).count(qe.CountRequest(exact=True))
        return CollectionInfo(exists=True, metadata=metadata, points=int(points))

    def _set_alias(self, alias: str, collection: str | None) -> None:
        if collection is not None and collection in self._catalog.state.collections:
            # What an alias serves is on disk in its segments first, not only in the WAL.
            self._shard(collection).flush()
        self._catalog.set_alias(alias, collection)

    def _retrieve_found(self, name: str, ids: list[str], with_vectors: bool) -> list[StoredPoint]:
        """Those found, in the order asked, once each; an id that is no UUID cannot be found."""
        unique = list(dict.fromkeys(i for i in map(_uuid_or_none, ids) if i is not None))
        shard = self._shard(name)
        if not unique:
            return []
        found = {str(r.id): point_from_record(r) for r in shard.retrieve(unique, True, with_vectors)}
        return [found[i] for i in unique if i in found]

    def _scroll(self, name: str, offset: str | None, limit: int, with_vectors: bool
                ) -> tuple[list[StoredPoint], str | None]:
        records, next_offset = self._shard(name).scroll(
            qe.ScrollRequest(offset=offset, limit=limit, with_payload=True, with_vector=with_vectors)
        )
        return [point_from_record(r) for r in records], (str(next_offset) if next_offset is not None else None)

    def _query(self, query: HybridQuery, point_filter: qe.Filter) -> list[ScoredHit]:
        shard = self._shard(query.collection)
        sparse = _edge_sparse(query.sparse) if query.sparse is not None and query.sparse.indices else None
        dense_params = self._dense_params(query.collection, max(query.candidates, query.limit))
        if query.dense is not None and sparse is not None:
            return _fused_query(shard, query, list(query.dense), sparse, point_filter, dense_params)
        using, vector = (DENSE, list(query.dense)) if query.dense is not None else (SPARSE, sparse)
        points = shard.query(qe.QueryRequest(
            limit=query.limit, query=qe.Query.Nearest(vector, using=using), filter=point_filter,
            params=dense_params if using == DENSE else None, with_payload=True,
        ))
        return [
            ScoredHit(
                id=str(p.id),
                fused=rank_score(rank, query.rrf_k),
                payload=p.payload or {},
                dense=float(p.score) if using == DENSE else None,
                sparse=float(p.score) if using == SPARSE else None,
            )
            for rank, p in enumerate(points)
        ]

    def _dense_params(self, name: str, limit: int) -> qe.SearchParams:
        """Exact below the HNSW size; above it the graph, over whatever segments it already covers
        (the engine scores the others exactly)."""
        if not self.config.uses_hnsw(self._points.get(self._catalog.resolve(name), 0)):
            return _EXACT
        quantization = None
        if self.config.quantized:
            quantization = qe.QuantizationSearchParams(rescore=self.config.rescore,
                                                       oversampling=self.config.oversampling)
        return qe.SearchParams(hnsw_ef=max(self.config.hnsw_ef, limit), quantization=quantization)

    def _close_all(self) -> None:
        try:
            for shard in self._shards.values():
                shard.flush()
                shard.close()
            self._shards.clear()
        finally:
            self._catalog.release()

    # --- plumbing ----------------------------------------------------------------------------

    async def _run(self, method: Callable[..., Any], *args: Any) -> Any:
        if self._closed:
            raise RagmeshError(ErrorCode.UNAVAILABLE, "vector store is closed")
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, method, *args)
        except RagmeshError:
            raise
        except Exception as exc:  # noqa: BLE001 - translated to the taxonomy right here
            raise _translate(exc) from None


def _fused_query(shard: qe.EdgeShard, query: HybridQuery, dense: list[float], sparse: qe.SparseVector,
                 point_filter: qe.Filter, dense_params: qe.SearchParams) -> list[ScoredHit]:
    """Both candidate lists in one planned batch (ids only), RRF here, then payloads and dense
    vectors of the winners alone."""
    candidates = max(query.candidates, query.limit)
    dense_list, sparse_list = shard.query_batch(qe.QueryBatchRequest([
        qe.QueryRequest(limit=candidates, query=qe.Query.Nearest(dense, using=DENSE), filter=point_filter,
                        params=dense_params),
        qe.QueryRequest(limit=candidates, query=qe.Query.Nearest(sparse, using=SPARSE), filter=point_filter),
    ]))
    fused = reciprocal_rank_fusion(
        [[str(p.id) for p in dense_list], [str(p.id) for p in sparse_list]], query.rrf_k, query.limit
    )
    if not fused:
        return []
    ids = [i for i, _ in fused]
    records = {str(r.id): r for r in shard.retrieve(ids, True, False)}
    dense_scores, bm25 = _scores_of_both(shard, dense, sparse, point_filter, dense_list, sparse_list, ids)
    hits = []
    for point_id, score in fused:
        record = records.get(point_id)
        if record is None:  # cannot happen while one thread both writes and reads
            continue
        hits.append(ScoredHit(id=point_id, fused=score, payload=record.payload or {},
                              dense=dense_scores.get(point_id), sparse=bm25.get(point_id, 0.0)))
    return hits


def _scores_of_both(shard: qe.EdgeShard, dense: list[float], sparse: qe.SparseVector, point_filter: qe.Filter,
                    dense_list: list[Any], sparse_list: list[Any], ids: list[str]
                    ) -> tuple[dict[str, float], dict[str, float]]:
    """Every fused hit's dense cosine and BM25 score. Each candidate list scored its own hits (the
    dense one on the original vectors, rescored when quantized); the hits that came from one list
    alone are scored by the other signal in one more batch of two queries restricted to their ids,
    exactly (no graph, no quantization), so the engine computes them and no vector crosses into
    Python. An id still without a BM25 score shares no term with the query (BM25 0.0)."""
    dense_scores = {str(p.id): float(p.score) for p in dense_list}
    bm25 = {str(p.id): float(p.score) for p in sparse_list}
    requests, into = [], []
    for scores, using, vector, params in ((dense_scores, DENSE, dense, _EXACT), (bm25, SPARSE, sparse, None)):
        missing = {i for i in ids if i not in scores}
        if missing:
            only = qe.Filter(must=[point_filter, qe.HasIdCondition(missing)])
            requests.append(qe.QueryRequest(limit=len(missing), query=qe.Query.Nearest(vector, using=using),
                                            filter=only, params=params))
            into.append(scores)
    if requests:
        for scores, points in zip(into, shard.query_batch(qe.QueryBatchRequest(requests))):
            scores.update((str(p.id), float(p.score)) for p in points)
    return dense_scores, bm25


def edge_config(vector_size: int, config: VectorIndexConfig) -> qe.EdgeConfig:
    """A new shard's layout. The graph settings take effect only when ``build_index`` runs; every
    segment above 1 KB is then indexed, since the collection-level size decided that it runs.
    ``payload_m=0``: no extra per-payload-value graphs (every collection holds one corpus, so the
    ACL filter matches all of it; selective filters fall back to exact scoring)."""
    memory = qe.Memory.Cold if config.on_disk else None
    quantization = None
    if config.quantized:
        quantization = qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, quantile=0.99, memory=qe.Memory.Pinned)
    return qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=vector_size, distance=qe.Distance.Cosine, memory=memory)},
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        hnsw_config=qe.HnswIndexConfig(m=config.hnsw_m, ef_construct=config.hnsw_ef_construct,
                                       full_scan_threshold=_FULL_SCAN_KB, payload_m=0, memory=memory),
        quantization_config=quantization,
        optimizers=qe.EdgeOptimizersConfig(indexing_threshold=1),
    )


def _write_bytes(points: Sequence[StoredPoint]) -> int:
    """What an upsert adds on disk at most: the WAL record and the segment's copy of each point."""
    size = 0
    for point in points:
        size += 8 * len(point.dense or ()) + 16 * len(point.sparse.indices if point.sparse else ())
        size += len(msgspec.json.encode(point.payload))
    return 2 * size


def _hole_bytes(folder: Path | None) -> int:
    """Bytes the engine's sparse files may still take: their size minus what the disk holds."""
    if folder is None:
        return 0
    return sum(max(0, st.st_size - st.st_blocks * 512) for st in _file_stats(folder))


def _used_bytes(folder: Path) -> int:
    return sum(max(st.st_size, st.st_blocks * 512) for st in _file_stats(folder))


def _file_stats(folder: Path) -> list[os.stat_result]:
    stats = []
    for base, _, files in os.walk(folder):
        for name in files:
            try:
                stats.append(os.stat(os.path.join(base, name)))
            except FileNotFoundError:  # the engine dropped it meanwhile
                continue
    return stats


def _log_build(collection: str, build: Future) -> None:
    error = build.exception()
    if error is None:
        log.info("vector index built", extra={"fields": {"collection": collection}})
    else:  # searches stay exact; the next alias swap or build_index tries again
        log.error("vector index build failed", extra={"fields": {"collection": collection,
                                                                  "error": str(error)[:200]}})


def build_edge_filter(point_filter: PointFilter) -> qe.Filter:
    """The port's ``keyword_conditions`` in the edge engine's types."""
    return qe.Filter(must=[
        qe.FieldCondition(key=key, match=qe.MatchAny(value) if isinstance(value, list) else qe.MatchValue(value))
        for key, value in keyword_conditions(point_filter)
    ])


def _to_edge_point(point: StoredPoint) -> qe.Point:
    vector: dict[str, Any] = {}
    if point.dense is not None:
        vector[DENSE] = list(point.dense)
    if point.sparse is not None:
        vector[SPARSE] = _edge_sparse(point.sparse)
    try:
        return qe.Point(_canonical(point.id), vector, stored_payload(point))
    except (TypeError, ValueError, OverflowError):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "a point id, vector or payload is malformed") from None


def _edge_sparse(sparse: SparseVector) -> qe.SparseVector:
    return qe.SparseVector(list(sparse.indices), [float(v) for v in sparse.values])


def _canonical(point_id: str) -> str:
    """Ids as the engine returns them (lowercase, hyphenated UUIDs); malformed ones are rejected."""
    canonical = _uuid_or_none(point_id)
    if canonical is None:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "a point id is not a UUID")
    return canonical


def _uuid_or_none(point_id: str) -> str | None:
    try:
        return str(uuid.UUID(str(point_id)))
    except ValueError:
        return None


_DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)


def _translate(exc: Exception) -> RagmeshError:
    text = str(exc)
    if (isinstance(exc, OSError) and exc.errno in _DISK_FULL) or any(
            f"os error {n})" in text for n in _DISK_FULL):
        log.error("vector store disk full", extra={"fields": {"error": text[:200]}})
        return RagmeshError(ErrorCode.UNAVAILABLE, "the vector store's disk is full; nothing more was written",
                            {"reason": "disk_full"})
    if isinstance(exc, (ValueError, TypeError, OverflowError)) or text.startswith(
        ("Wrong input", "Vector dimension error", "Validation")
    ):
        log.warning("vector store rejected a request", extra={"fields": {"error": text[:200]}})
        return RagmeshError(ErrorCode.INVALID_ARGUMENT, "vector store rejected the request")
    if isinstance(exc, OSError) or "not initialized" in text:
        log.error("vector store storage unavailable", extra={"fields": {"error": text[:200]}})
        return RagmeshError(ErrorCode.UNAVAILABLE, "vector store storage unavailable")
    log.exception("vector store failed")
    return RagmeshError(ErrorCode.INTERNAL, "vector store failed")
