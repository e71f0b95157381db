"""QdrantVectorStore against real qdrant-client local mode (in memory and on disk), and the gRPC codec."""

from __future__ import annotations

import math
import sqlite3
import uuid
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import CollectionMeta, CorpusMeta
from ragmesh_common.vectorstore.codec import (
    hit_from_proto,
    hit_to_proto,
    meta_from_json,
    meta_to_json,
    point_from_proto,
    point_to_proto,
    query_from_proto,
    query_to_proto,
)
from ragmesh_common.vectorstore.port import (
    HybridQuery,
    PointFilter,
    ScoredHit,
    SparseVector,
    StoredPoint,
    normalize_path_prefix,
    path_prefixes,
)
from ragmesh_common.vectorstore.qdrant import QdrantVectorStore, build_filter

META = CollectionMeta(
    index_version="v1",
    corpus=CorpusMeta(corpus="docs@1", library="docs", version="1", license="MIT"),
    embedding_model="m",
    vector_size=3,
    lexical_version="bm25-r1-x",
    lexical_config={"language": "english"},
    documents=2,
)


def point(source_path: str, dense: list[float], corpus: str = "docs@1", tags: list[str] | None = None,
          sparse: SparseVector | None = None) -> StoredPoint:
    return StoredPoint(
        id=str(uuid.uuid4()),
        payload={"corpus": corpus, "source_path": source_path, "tags": tags or [], "library": "docs",
                 "version": "1"},
        dense=dense,
        sparse=sparse or SparseVector(indices=[1, 7], values=[1.0, 0.5]),
    )


@pytest.fixture
async def store():
    adapter = QdrantVectorStore(QdrantClient(":memory:"))
    yield adapter
    await adapter.close()


async def test_collection_metadata_round_trips(store: QdrantVectorStore) -> None:
    await store.create_collection("rm__docs-1__v1", 3, META)
    info = await store.get_collection("rm__docs-1__v1")
    assert info.exists and info.metadata == META and info.points == 0
    assert (await store.get_collection("rm__nope__v1")).exists is False
    assert await store.list_collections() == ["rm__docs-1__v1"]
    with pytest.raises(RagmeshError) as exc:
        await store.create_collection("rm__docs-1__v1", 3, META)
    assert exc.value.code == ErrorCode.CONFLICT


async def test_alias_swap_and_delete(store: QdrantVectorStore) -> None:
    await store.create_collection("c1", 3, META)
    await store.create_collection("c2", 3, META)
    await store.set_alias("a", "c1")
    await store.set_alias("a", "c2")
    assert await store.get_aliases() == {"a": "c2"}
    assert (await store.get_collection("a")).exists  # an alias reads as its collection
    await store.set_alias("a", None)
    assert await store.get_aliases() == {}
    with pytest.raises(RagmeshError) as exc:
        await store.set_alias("a", "missing")
    assert exc.value.code == ErrorCode.NOT_FOUND
    assert await store.delete_collection("c1") is True


async def test_upsert_scroll_count_and_ids(store: QdrantVectorStore) -> None:
    await store.create_collection("c", 3, META)
    points = [point(f"docs/{i}.md", [1.0, float(i), 0.0]) for i in range(5)]
    await store.upsert("c", points)
    assert await store.count("c") == 5
    seen, offset = [], None
    while True:
        page, offset = await store.scroll("c", offset=offset, limit=2)
        seen.extend(page)
        if offset is None:
            break
    assert sorted(p.id for p in seen) == sorted(p.id for p in points)
    assert all(p.dense is None for p in seen)
    chosen, _ = await store.scroll("c", ids=[points[3].id, str(uuid.uuid4())], with_vectors=True)
    assert [p.id for p in chosen] == [points[3].id]
    assert chosen[0].sparse == points[3].sparse
    assert chosen[0].dense is not None and len(chosen[0].dense) == 3
    assert chosen[0].payload["path_prefixes"] == ["docs", "docs/3.md"]
    with pytest.raises(RagmeshError) as exc:
        await store.count("missing")
    assert exc.value.code == ErrorCode.NOT_FOUND


async def test_hybrid_query_filters_inside_the_store(store: QdrantVectorStore) -> None:
    await store.create_collection("c", 3, META)
    mine = point("docs/a/x.md", [1.0, 0.0, 0.0], tags=["t1", "t2"])
    sibling = point("docs/ab.md", [1.0, 0.0, 0.0], tags=["t1", "t2"])
    foreign = point("docs/a/y.md", [1.0, 0.0, 0.0], corpus="other@1", tags=["t1", "t2"])
    await store.upsert("c", [mine, sibling, foreign])
    query = HybridQuery(
        collection="c",
        filter=PointFilter(corpora=("docs@1",), tags=("t1", "t2"), path_prefix="docs/a/"),
        limit=10,
        dense=[1.0, 0.0, 0.0],
        sparse=SparseVector(indices=[1], values=[1.0]),
    )
    hits = await store.hybrid_query(query)
    assert [h.id for h in hits] == [mine.id]
    assert hits[0].dense == pytest.approx(1.0)
    # BM25 with IDF over the whole collection: term 1 is in all three points.
    assert hits[0].sparse == pytest.approx(math.log(1 + 0.5 / 3.5) * 1.0, rel=1e-5)
    assert hits[0].fused > 0
    sparse_only = await store.hybrid_query(HybridQuery(
        collection="c", filter=PointFilter(corpora=("docs@1", "other@1")), limit=10,
        sparse=SparseVector(indices=[7], values=[1.0]),
    ))
    assert {h.id for h in sparse_only} == {mine.id, sibling.id, foreign.id}
    assert all(h.sparse is not None and h.dense is None for h in sparse_only)
    assert [h.fused for h in sparse_only] == sorted((h.fused for h in sparse_only), reverse=True)


async def test_query_without_readable_corpora_is_refused(store: QdrantVectorStore) -> None:
    with pytest.raises(RagmeshError) as exc:
        build_filter(PointFilter(corpora=()))
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT


def test_path_prefix_helpers() -> None:
    assert path_prefixes("docs/a/b.md") == ["docs", "docs/a", "docs/a/b.md"]
    assert path_prefixes("./x.md") == ["x.md"]
    assert normalize_path_prefix(" ./docs//a/ ") == "docs/a"
    assert normalize_path_prefix("/") == ""


async def test_local_storage_persists_metadata_and_aliases_and_uses_wal(tmp_path: Path) -> None:
    path = tmp_path / "qdrant"
    store = QdrantVectorStore(QdrantClient(path=str(path)))
    assert store.kind == "qdrant-local"
    await store.create_collection("c", 3, META)
    await store.upsert("c", [point("docs/a.md", [0.0, 1.0, 0.0])])
    await store.set_alias("a", "c")
    await store.close()
    reopened = QdrantVectorStore(QdrantClient(path=str(path)))
    try:
        assert (await reopened.get_collection("c")).metadata == META
        assert await reopened.get_aliases() == {"a": "c"}
        assert await reopened.count("c") == 1
    finally:
        await reopened.close()
    databases = list(path.rglob("storage.sqlite"))
    assert databases
    with sqlite3.connect(databases[0]) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_codec_round_trips_points_and_metadata() -> None:
    original = point("docs/a.md", [0.5, 0.25, 0.0])
    decoded = point_from_proto(point_to_proto(original))
    assert decoded == original
    bare = StoredPoint(id=original.id, payload={})
    assert point_from_proto(point_to_proto(bare)) == bare
    assert meta_from_json(meta_to_json(META)) == META
    with pytest.raises(RagmeshError) as exc:
        meta_from_json(b'{"index_version": 1}')
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT


def test_codec_round_trips_queries_and_hits() -> None:
    query = HybridQuery(
        collection="c", filter=PointFilter(corpora=("a", "b"), library="l", version="1", tags=("t",),
                                           path_prefix="docs"),
        limit=7, dense=[0.5, 0.25], sparse=SparseVector(indices=[3], values=[1.0]), candidates=20, rrf_k=10,
    )
    assert query_from_proto(query_to_proto(query)) == query
    sparse_only = HybridQuery(collection="c", filter=PointFilter(corpora=("a",)), limit=1,
                              sparse=SparseVector(indices=[1], values=[1.0]))
    assert query_from_proto(query_to_proto(sparse_only)) == sparse_only
    hit = ScoredHit(id="x", fused=0.5, payload={"k": [1]}, dense=None, sparse=2.0)
    assert hit_from_proto(hit_to_proto(hit)) == hit
    with pytest.raises(RagmeshError) as exc:
        query_from_proto(query_to_proto(HybridQuery(collection="c", filter=PointFilter(corpora=("a",)), limit=0)))
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT
