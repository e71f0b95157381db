"""The vector-store port: what the indexer writes and retrieval reads, with no client library in sight.

Adapters: :class:`~ragmesh_common.vectorstore.qdrant.QdrantVectorStore` (qdrant-client, local or
server), :class:`~ragmesh_common.vectorstore.edge.EdgeVectorStore` (Qdrant Edge, the engine in-process;
the embedded default) and :class:`~ragmesh_common.vectorstore.grpc_store.GrpcVectorStore` (the
retrieval process's ``ragmesh.v1.VectorStore`` service, for the indexer in the embedded default, where
only the retrieval process may open the storage). tests/unit/vectorstore holds every in-process
adapter to one contract. Failures surface as ``RagmeshError``: ``NOT_FOUND`` for a missing
collection, ``UNAVAILABLE`` when the store cannot be reached.
"""

from __future__ import annotations

import abc
from typing import Any, Sequence

import msgspec

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import DENSE, SPARSE, CollectionMeta

# Payload key the store derives from ``source_path`` on every upsert: the path itself and each of its
# parent folders ("docs/a/b.md" -> ["docs", "docs/a", "docs/a/b.md"]). Qdrant has no prefix match on
# keyword fields, so a path-prefix filter becomes one exact match on this list.
PATH_PREFIXES_KEY = "path_prefixes"
# Keyword payload fields a store indexes, so that a filter reads the index instead of each payload
# (Qdrant's local mode has no payload index and checks every point).
INDEXED_KEYWORDS = ("corpus", "library", "version", "tags", PATH_PREFIXES_KEY, "doc_id")
DEFAULT_CANDIDATES = 50
DEFAULT_RRF_K = 60  # the constant of Cormack et al.; Qdrant's own default is 2


class SparseVector(msgspec.Struct, frozen=True):
    indices: list[int]
    values: list[float]


class StoredPoint(msgspec.Struct):
    """One point: id is the chunk id (UUID string); payload is a ChunkPayload as a dict."""

    id: str
    payload: dict[str, Any]
    dense: list[float] | None = None
    sparse: SparseVector | None = None


class CollectionInfo(msgspec.Struct, frozen=True):
    exists: bool
    metadata: CollectionMeta | None = None
    points: int = 0


class PointFilter(msgspec.Struct, frozen=True):
    """Conditions every returned point meets; all of them hold at once (AND).

    ``corpora`` is the caller's ACL and is never empty: a query without it is refused.
    ``tags``: the point carries every listed tag. ``path_prefix``: whole path segments, so "docs/a"
    matches "docs/a/x.md" and "docs/a" but not "docs/ab.md".
    """

    corpora: tuple[str, ...]
    library: str = ""
    version: str = ""
    tags: tuple[str, ...] = ()
    path_prefix: str = ""


class HybridQuery(msgspec.Struct, frozen=True):
    """One query against one collection. Dense and sparse both set: RRF fusion of the two candidate
    lists inside the store; one of them set: that signal alone."""

    collection: str
    filter: PointFilter
    limit: int
    dense: list[float] | None = None
    sparse: SparseVector | None = None
    candidates: int = DEFAULT_CANDIDATES  # per-signal candidate list length before fusion
    rrf_k: int = DEFAULT_RRF_K


class ScoredHit(msgspec.Struct, frozen=True):
    """``fused`` orders hits of one query and across collections: the RRF score, or for a
    single-signal query the RRF score of that one list (1 / (k + rank)), so both kinds merge."""

    id: str
    fused: float
    payload: dict[str, Any]
    dense: float | None = None  # cosine similarity to the query vector
    # BM25 score over the whole collection (IDF modifier); 0.0 for a hit that shares no term with
    # the query; None when the query had no sparse part.
    sparse: float | None = None


class VectorStorePort(abc.ABC):
    """Async vector store. ``kind`` names the backend for stats ("qdrant-edge", "qdrant-local",
    "qdrant-server")."""

    kind: str = "unknown"

    @abc.abstractmethod
    async def create_collection(self, name: str, vector_size: int, metadata: CollectionMeta) -> None:
        """Named dense vector (cosine) + named sparse vector with IDF; CONFLICT if it exists."""

    @abc.abstractmethod
    async def delete_collection(self, name: str) -> bool:
        """True when something was deleted."""

    @abc.abstractmethod
    async def list_collections(self) -> list[str]: ...

    async def upsert(self, name: str, points: Sequence[StoredPoint]) -> None:
        """Writes the points (each payload gains ``path_prefixes``); no points is no call at all."""
        if points:
            await self._write(name, points)

    async def scroll(
        self,
        name: str,
        *,
        offset: str | None = None,
        limit: int = 256,
        with_vectors: bool = False,
        ids: Sequence[str] | None = None,
    ) -> tuple[list[StoredPoint], str | None]:
        """A page of points and the next offset (None at the end); with ``ids``: exactly those found."""
        if ids is None:
            return await self._page(name, offset or None, max(1, limit), with_vectors)
        if not ids:
            return [], None
        return await self._retrieve(name, list(ids), with_vectors), None

    @abc.abstractmethod
    async def _write(self, name: str, points: Sequence[StoredPoint]) -> None:
        """``upsert`` of at least one point."""

    @abc.abstractmethod
    async def _page(self, name: str, offset: str | None, limit: int, with_vectors: bool
                    ) -> tuple[list[StoredPoint], str | None]:
        """``scroll`` without ids: ``offset`` None is the start, ``limit`` at least 1."""

    @abc.abstractmethod
    async def _retrieve(self, name: str, ids: list[str], with_vectors: bool) -> list[StoredPoint]:
        """``scroll`` with at least one id: those found, in the order asked, once each."""

    @abc.abstractmethod
    async def count(self, name: str) -> int: ...

    @abc.abstractmethod
    async def get_collection(self, name: str) -> CollectionInfo:
        """``exists=False`` (not an error) for a missing collection; ``name`` may be an alias."""

    @abc.abstractmethod
    async def set_alias(self, alias: str, collection: str | None) -> None:
        """Point ``alias`` at ``collection`` in one atomic step; None deletes the alias."""

    @abc.abstractmethod
    async def get_aliases(self) -> dict[str, str]:
        """alias -> collection."""

    @abc.abstractmethod
    async def hybrid_query(self, query: HybridQuery) -> list[ScoredHit]: ...

    async def close(self) -> None:
        return None


def path_prefixes(source_path: str) -> list[str]:
    parts = [part for part in source_path.strip("/").split("/") if part and part != "."]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def normalize_path_prefix(prefix: str) -> str:
    """The form stored in ``path_prefixes``: no leading "./" or "/", no trailing "/"."""
    return "/".join(part for part in prefix.strip().strip("/").split("/") if part and part != ".")


def rank_score(rank: int, rrf_k: int) -> float:
    """RRF contribution of a 0-based rank in one list, the same formula Qdrant uses."""
    return 1.0 / (rank + rrf_k)


def stored_payload(point: StoredPoint) -> dict[str, Any]:
    """The payload a store writes for a point: its own, plus ``path_prefixes`` of its ``source_path``."""
    payload = dict(point.payload)
    payload[PATH_PREFIXES_KEY] = path_prefixes(str(payload.get("source_path", "")))
    return payload


def keyword_conditions(point_filter: PointFilter) -> list[tuple[str, str | list[str]]]:
    """The filter as keyword matches every adapter turns into its own types, all of which must hold:
    ``(key, [values])`` matches any of the values, ``(key, value)`` that one value. INVALID_ARGUMENT
    without readable corpora."""
    if not point_filter.corpora:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "a query needs the caller's readable corpora")
    conditions: list[tuple[str, str | list[str]]] = [("corpus", list(point_filter.corpora))]
    if point_filter.library:
        conditions.append(("library", point_filter.library))
    if point_filter.version:
        conditions.append(("version", point_filter.version))
    conditions.extend(("tags", tag) for tag in point_filter.tags)
    prefix = normalize_path_prefix(point_filter.path_prefix)
    if prefix:
        conditions.append((PATH_PREFIXES_KEY, prefix))
    return conditions


def point_from_record(record: Any) -> StoredPoint:
    """A point from a record as both Qdrant engines return one (``id``, ``payload``, ``vector``: a
    dict of the named vectors, the sparse one with ``indices`` and ``values``)."""
    vectors = record.vector if isinstance(record.vector, dict) else {}
    dense = vectors.get(DENSE)
    raw_sparse = vectors.get(SPARSE)
    sparse = None
    if raw_sparse is not None:
        sparse = SparseVector(indices=list(raw_sparse.indices), values=[float(v) for v in raw_sparse.values])
    return StoredPoint(
        id=str(record.id),
        payload=dict(record.payload or {}),
        dense=[float(x) for x in dense] if dense is not None else None,
        sparse=sparse,
    )
