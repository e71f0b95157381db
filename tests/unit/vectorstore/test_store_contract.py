"""The vector-store port's contract, run against every in-process adapter: qdrant-client local mode
(in memory and on disk) and Qdrant Edge. Scores are checked against values computed by hand."""

from __future__ import annotations

import math
import uuid

import msgspec
import numpy as np
import pytest
from vectorstore_fixtures import META, point

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.vectorstore.port import (
    HybridQuery,
    PointFilter,
    SparseVector,
    StoredPoint,
    VectorStorePort,
)

DOCS = PointFilter(corpora=("docs@1",))


async def codes(awaitable) -> ErrorCode:  # type: ignore[no-untyped-def]
    with pytest.raises(RagmeshError) as exc:
        await awaitable
    return exc.value.code


def cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- collections and metadata ----------------------------------------------------------------


async def test_collection_metadata_round_trips_and_names_are_unique(store: VectorStorePort) -> None:
    await store.create_collection("rm__docs-1__v1", 3, META)
    info = await store.get_collection("rm__docs-1__v1")
    assert info.exists and info.metadata == META and info.points == 0
    assert msgspec.json.encode(info.metadata) == msgspec.json.encode(META)
    assert (await store.get_collection("rm__nope__v1")).exists is False
    await store.create_collection("rm__docs-1__v0", 3, META)
    assert await store.list_collections() == ["rm__docs-1__v0", "rm__docs-1__v1"]
    assert await codes(store.create_collection("rm__docs-1__v1", 3, META)) == ErrorCode.CONFLICT
    assert await codes(store.create_collection("c0", 0, META)) == ErrorCode.INVALID_ARGUMENT


async def test_delete_collection_drops_its_points_and_aliases(store: VectorStorePort) -> None:
    await store.create_collection("c1", 3, META)
    await store.upsert("c1", [point("docs/a.md", [1.0, 0.0, 0.0])])
    await store.set_alias("a", "c1")
    assert await store.delete_collection("c1") is True
    assert await store.delete_collection("c1") is False
    assert await store.get_aliases() == {}
    assert await store.list_collections() == []
    assert await codes(store.count("c1")) == ErrorCode.NOT_FOUND
    await store.create_collection("c1", 3, META)  # the same name again starts empty
    assert await store.count("c1") == 0


# --- aliases ---------------------------------------------------------------------------------


async def test_alias_swaps_in_one_step_and_reads_as_its_collection(store: VectorStorePort) -> None:
    newer = msgspec.structs.replace(META, index_version="v2")
    await store.create_collection("c1", 3, META)
    await store.create_collection("c2", 3, newer)
    old, new = point("docs/old.md", [1.0, 0.0, 0.0]), point("docs/new.md", [1.0, 0.0, 0.0])
    await store.upsert("c1", [old])
    await store.upsert("c2", [new, point("docs/new2.md", [0.0, 1.0, 0.0])])
    await store.set_alias("a", "c1")
    assert (await store.get_collection("a")).metadata == META
    await store.set_alias("a", "c2")
    assert await store.get_aliases() == {"a": "c2"}
    info = await store.get_collection("a")
    assert info.exists and info.metadata == newer and info.points == 2
    assert await store.count("a") == 2
    hits = await store.hybrid_query(HybridQuery(collection="a", filter=DOCS, limit=1, dense=[1.0, 0.0, 0.0]))
    assert [h.id for h in hits] == [new.id]
    await store.set_alias("a", None)
    await store.set_alias("a", None)  # deleting a missing alias is no error
    assert await store.get_aliases() == {}
    assert (await store.get_collection("a")).exists is False


async def test_alias_errors(store: VectorStorePort) -> None:
    await store.create_collection("c1", 3, META)
    await store.set_alias("a", "c1")
    assert await codes(store.set_alias("b", "missing")) == ErrorCode.NOT_FOUND
    assert await codes(store.set_alias("c1", "c1")) == ErrorCode.CONFLICT  # an alias may not shadow a collection
    assert await codes(store.create_collection("a", 3, META)) == ErrorCode.CONFLICT
    assert await store.get_aliases() == {"a": "c1"}


# --- points ----------------------------------------------------------------------------------


async def test_upsert_scroll_count_and_payload_round_trip(store: VectorStorePort) -> None:
    await store.create_collection("c", 3, META)
    points = [point(f"docs/{i}.md", [1.0, float(i), 0.0], nested={"k": [1, "two", None]}, n=i) for i in range(7)]
    await store.upsert("c", points)
    assert await store.count("c") == 7
    seen: list[StoredPoint] = []
    offset = None
    while True:
        page, offset = await store.scroll("c", offset=offset, limit=3)
        assert len(page) <= 3
        seen.extend(page)
        if offset is None:
            break
    assert sorted(p.id for p in seen) == sorted(p.id for p in points)
    assert all(p.dense is None and p.sparse is None for p in seen)
    by_id = {p.id: p for p in seen}
    for original in points:
        payload = by_id[original.id].payload
        assert payload == {**original.payload, "path_prefixes": ["docs", original.payload["source_path"]]}
    changed = msgspec.structs.replace(points[0], payload={**points[0].payload, "n": 99})
    await store.upsert("c", [changed])  # same id: replaced, not added
    assert await store.count("c") == 7
    [again], _ = await store.scroll("c", ids=[changed.id])
    assert again.payload["n"] == 99


async def test_scroll_by_ids_returns_those_found_with_vectors(store: VectorStorePort) -> None:
    await store.create_collection("c", 3, META)
    points = [point(f"docs/{i}.md", [3.0, float(i), 4.0],
                    sparse=SparseVector(indices=[2, 40 + i], values=[0.25, 1.5])) for i in range(4)]
    await store.upsert("c", points)
    wanted = [points[3].id, str(uuid.uuid4()), points[1].id]
    chosen, offset = await store.scroll("c", ids=wanted, with_vectors=True)
    assert offset is None
    assert [p.id for p in chosen] == [points[3].id, points[1].id]
    for got, original in zip(chosen, (points[3], points[1])):
        assert got.sparse == original.sparse
        expected = np.asarray(original.dense) / np.linalg.norm(original.dense)  # cosine stores unit vectors
        assert got.dense == pytest.approx(expected.tolist(), abs=1e-6)
    bare, _ = await store.scroll("c", ids=[points[0].id])
    assert bare[0].dense is None and bare[0].sparse is None
    assert await store.scroll("c", ids=[]) == ([], None)


async def test_missing_collection_is_not_found_everywhere(store: VectorStorePort) -> None:
    assert await codes(store.count("missing")) == ErrorCode.NOT_FOUND
    assert await codes(store.scroll("missing")) == ErrorCode.NOT_FOUND
    assert await codes(store.upsert("missing", [point("a.md", [1.0, 0.0, 0.0])])) == ErrorCode.NOT_FOUND
    query = HybridQuery(collection="missing", filter=DOCS, limit=3, dense=[1.0, 0.0, 0.0])
    assert await codes(store.hybrid_query(query)) == ErrorCode.NOT_FOUND


async def test_malformed_points_are_rejected(store: VectorStorePort) -> None:
    await store.create_collection("c", 3, META)
    assert await codes(store.upsert("c", [point("a.md", [1.0, 0.0])])) == ErrorCode.INVALID_ARGUMENT
    malformed = StoredPoint(id="not-a-uuid", payload={}, dense=[1.0, 0.0, 0.0])
    assert await codes(store.upsert("c", [malformed])) == ErrorCode.INVALID_ARGUMENT
    assert await store.count("c") == 0


# --- filters ---------------------------------------------------------------------------------

FILTER_CASES = {
    "acl": (PointFilter(corpora=("docs@1",)), {"mine", "exact", "sibling", "one_tag", "v2", "guide"}),
    "acl-any": (PointFilter(corpora=("nobody@1", "other@1")), {"foreign"}),
    "acl-none-readable": (PointFilter(corpora=("nobody@1",)), set()),
    "tags-all-of": (PointFilter(corpora=("docs@1", "other@1"), tags=("t1", "t2")),
                    {"mine", "exact", "sibling", "foreign", "v2", "guide"}),
    "path-segments": (PointFilter(corpora=("docs@1",), path_prefix="./docs/a/"), {"mine", "exact", "one_tag", "v2", "guide"}),
    "library-version": (PointFilter(corpora=("docs@1",), library="docs", version="1"),
                        {"mine", "exact", "sibling", "one_tag"}),
    "all-at-once": (PointFilter(corpora=("docs@1", "other@1"), library="docs", version="1", tags=("t2", "t1"),
                                path_prefix="docs/a"), {"mine", "exact", "foreign"}),
}


async def test_filters_hold_inside_the_store(store: VectorStorePort) -> None:
    both = ["t1", "t2"]
    named = {
        "mine": point("docs/a/x.md", [1.0, 0.0, 0.0], tags=both),
        "exact": point("docs/a", [0.9, 0.1, 0.0], tags=both),
        "sibling": point("docs/ab.md", [1.0, 0.0, 0.1], tags=both),
        "foreign": point("docs/a/y.md", [1.0, 0.1, 0.1], corpus="other@1", tags=both),
        "one_tag": point("docs/a/t.md", [0.8, 0.0, 0.0], tags=["t1"]),
        "v2": point("docs/a/z.md", [0.7, 0.0, 0.3], tags=both, version="2"),
        "guide": point("docs/a/g.md", [0.7, 0.3, 0.0], tags=both, library="guide"),
    }
    names = {v.id: k for k, v in named.items()}
    await store.create_collection("c", 3, META)
    await store.upsert("c", list(named.values()))
    wrong = {}
    for case, (point_filter, expected) in FILTER_CASES.items():
        for mode in ("hybrid", "dense", "sparse"):
            dense = [1.0, 0.0, 0.0] if mode != "sparse" else None
            sparse = SparseVector(indices=[7], values=[1.0]) if mode != "dense" else None
            hits = await store.hybrid_query(HybridQuery(collection="c", filter=point_filter, limit=20, dense=dense,
                                                        sparse=sparse))
            if {names[h.id] for h in hits} != expected:
                wrong[f"{case}/{mode}"] = sorted(names[h.id] for h in hits)
    assert wrong == {}


async def test_query_without_readable_corpora_is_refused(store: VectorStorePort) -> None:
    await store.create_collection("c", 3, META)
    query = HybridQuery(collection="c", filter=PointFilter(corpora=()), limit=3, dense=[1.0, 0.0, 0.0])
    assert await codes(store.hybrid_query(query)) == ErrorCode.INVALID_ARGUMENT


# --- scoring ---------------------------------------------------------------------------------


async def ranked_points(store: VectorStorePort) -> list[StoredPoint]:
    """Dense rank (to [1,0,0]) p0..p4; BM25 rank on term 5: p1, p3, p4, p0 (p2 lacks it)."""
    term5 = [0.1, 0.9, None, 0.5, 0.3]
    points = []
    for i, (t, weight) in enumerate(zip([0.0, 0.5, 1.0, 2.0, 4.0], term5)):
        sparse = SparseVector(indices=[5, 9], values=[weight, 1.0]) if weight else SparseVector([9], [1.0])
        points.append(point(f"docs/{i}.md", [1.0, t, 0.0], sparse=sparse))
    await store.create_collection("c", 3, META)
    await store.upsert("c", points)
    return points


@pytest.mark.parametrize("rrf_k", [60, 2])
async def test_hybrid_is_rrf_of_dense_and_bm25_candidates(store: VectorStorePort, rrf_k: int) -> None:
    p = await ranked_points(store)
    query = [1.0, 0.0, 0.0]
    hits = await store.hybrid_query(HybridQuery(collection="c", filter=DOCS, limit=5, dense=query,
                                                sparse=SparseVector([5], [1.0]), rrf_k=rrf_k))

    def rrf(*ranks: int) -> float:
        return sum(1.0 / (rrf_k + r) for r in ranks)

    expected = {p[0].id: rrf(0, 3), p[1].id: rrf(1, 0), p[2].id: rrf(2), p[3].id: rrf(3, 1), p[4].id: rrf(4, 2)}
    # Term 5 is in 4 of the 5 points; p2 lacks it and scores 0.0, not None.
    idf = math.log(1 + (5 - 4 + 0.5) / (4 + 0.5))
    bm25 = {p[0].id: 0.1 * idf, p[1].id: 0.9 * idf, p[2].id: 0.0, p[3].id: 0.5 * idf, p[4].id: 0.3 * idf}
    assert [h.id for h in hits] == sorted(expected, key=expected.__getitem__, reverse=True)
    for hit, original in zip(hits, sorted(p, key=lambda x: expected[x.id], reverse=True)):
        assert hit.fused == pytest.approx(expected[hit.id], rel=1e-12)
        assert hit.dense == pytest.approx(cos(query, original.dense), abs=1e-6)
        assert hit.sparse == pytest.approx(bm25[hit.id], rel=1e-5, abs=1e-9)
        assert hit.payload["source_path"] == original.payload["source_path"]


async def test_hybrid_fuses_only_the_candidate_lists(store: VectorStorePort) -> None:
    p = await ranked_points(store)
    hits = await store.hybrid_query(HybridQuery(collection="c", filter=DOCS, limit=2, dense=[1.0, 0.0, 0.0],
                                                sparse=SparseVector([5], [1.0]), candidates=2))
    # dense candidates p0, p1; BM25 candidates p1, p3: p1 is in both, p0 outranks p3 (1/60 > 1/61).
    assert [h.id for h in hits] == [p[1].id, p[0].id]
    assert [h.fused for h in hits] == pytest.approx([1 / 61 + 1 / 60, 1 / 60], rel=1e-12)
    # p0 came from the dense list alone and still carries its BM25 score over the collection.
    idf = math.log(1 + (5 - 4 + 0.5) / (4 + 0.5))
    assert [h.sparse for h in hits] == pytest.approx([0.9 * idf, 0.1 * idf], rel=1e-5)


async def test_a_hit_from_one_candidate_list_alone_carries_the_other_signals_score(store: VectorStorePort) -> None:
    p = await ranked_points(store)
    query = [1.0, 0.0, 0.0]
    hits = await store.hybrid_query(HybridQuery(collection="c", filter=DOCS, limit=3, dense=query,
                                                sparse=SparseVector([5], [1.0]), candidates=2))
    # dense candidates p0, p1; BM25 candidates p1, p3: p3 came from the BM25 list alone, p0 from the
    # dense one alone, and each is scored by the signal whose list it missed.
    assert [h.id for h in hits] == [p[1].id, p[0].id, p[3].id]
    for hit, original in zip(hits, (p[1], p[0], p[3])):
        assert hit.dense == pytest.approx(cos(query, original.dense), abs=1e-6)
    idf = math.log(1 + (5 - 4 + 0.5) / (4 + 0.5))
    assert [h.sparse for h in hits] == pytest.approx([0.9 * idf, 0.1 * idf, 0.5 * idf], rel=1e-5)


async def test_dense_only_ranks_by_cosine(store: VectorStorePort) -> None:
    p = await ranked_points(store)
    query = [1.0, 0.2, 0.0]
    hits = await store.hybrid_query(HybridQuery(collection="c", filter=DOCS, limit=4, dense=query))
    expected = sorted(p, key=lambda x: cos(query, x.dense), reverse=True)[:4]
    assert [h.id for h in hits] == [x.id for x in expected]
    assert [h.dense for h in hits] == pytest.approx([cos(query, x.dense) for x in expected], abs=1e-6)
    assert [h.fused for h in hits] == pytest.approx([1 / (60 + r) for r in range(4)], rel=1e-12)
    assert all(h.sparse is None for h in hits)


async def test_sparse_only_scores_bm25_with_idf(store: VectorStorePort) -> None:
    p = await ranked_points(store)
    hits = await store.hybrid_query(HybridQuery(collection="c", filter=DOCS, limit=10,
                                                sparse=SparseVector([5, 9], [1.0, 2.0])))
    n_points = len(p)

    def idf(containing: int) -> float:
        return math.log(1 + (n_points - containing + 0.5) / (containing + 0.5))

    weights = {p[0].id: 0.1, p[1].id: 0.9, p[2].id: 0.0, p[3].id: 0.5, p[4].id: 0.3}
    expected = {pid: 1.0 * idf(4) * w + 2.0 * idf(5) * 1.0 for pid, w in weights.items()}
    assert [h.id for h in hits] == sorted(expected, key=expected.__getitem__, reverse=True)
    assert [h.sparse for h in hits] == pytest.approx([expected[h.id] for h in hits], rel=1e-5)
    assert [h.fused for h in hits] == pytest.approx([1 / (60 + r) for r in range(5)], rel=1e-12)
    assert all(h.dense is None for h in hits)


async def test_a_query_without_any_signal_finds_nothing(store: VectorStorePort) -> None:
    await ranked_points(store)
    assert await store.hybrid_query(HybridQuery(collection="c", filter=DOCS, limit=3)) == []
    empty = HybridQuery(collection="c", filter=DOCS, limit=3, sparse=SparseVector([], []))
    assert await store.hybrid_query(empty) == []
    keywords_missing = HybridQuery(collection="c", filter=DOCS, limit=3, dense=[0.0, 1.0, 0.0],
                                   sparse=SparseVector([], []))
    assert len(await store.hybrid_query(keywords_missing)) == 3  # empty sparse: dense alone


# --- persistence -----------------------------------------------------------------------------


async def test_everything_survives_a_reopen(persistent) -> None:  # type: ignore[no-untyped-def]
    store = persistent()
    p = await ranked_points(store)
    await store.set_alias("a", "c")
    query = HybridQuery(collection="a", filter=DOCS, limit=5, dense=[1.0, 0.3, 0.0], sparse=SparseVector([5], [1.0]))
    before = await store.hybrid_query(query)
    await store.close()
    reopened = persistent()
    try:
        assert (await reopened.get_collection("c")).metadata == META
        assert await reopened.get_aliases() == {"a": "c"}
        assert await reopened.count("a") == len(p)
        [again], _ = await reopened.scroll("c", ids=[p[3].id], with_vectors=True)
        assert again.sparse == p[3].sparse and again.payload["path_prefixes"] == ["docs", "docs/3.md"]
        after = await reopened.hybrid_query(query)
        assert [(h.id, h.fused, h.payload) for h in after] == [(h.id, h.fused, h.payload) for h in before]
        # local mode keeps float64 vectors in memory but float32 on disk: equal to ~1e-8, not bit for bit
        assert [h.dense for h in after] == pytest.approx([h.dense for h in before], abs=1e-6)
        await reopened.upsert("c", [point("docs/late.md", [0.0, 0.0, 1.0])])
        assert await reopened.count("c") == len(p) + 1
    finally:
        await reopened.close()
