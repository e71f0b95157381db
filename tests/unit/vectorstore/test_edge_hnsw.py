"""The embedded store's HNSW graph: built only from ``hnsw_min_points`` on, the same top 10 as exact
search within the recall target (with and without int8 quantization), and searches that go on while
the graph is built."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest
from vectorstore_fixtures import META

from ragmesh_common.vectorstore.edge import EdgeVectorStore
from ragmesh_common.vectorstore.index_config import VectorIndexConfig
from ragmesh_common.vectorstore.port import HybridQuery, PointFilter, SparseVector, StoredPoint

DIM = 32
POINTS = 3000
FILTER = PointFilter(corpora=("docs@1",))


def clustered(n: int, seed: int) -> np.ndarray:
    """Unit vectors around 40 centres: neighbours that matter, as real embeddings have."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIM))
    rows = centres[rng.integers(0, 40, n)] + 0.6 * rng.standard_normal((n, DIM))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


VECTORS = clustered(POINTS, 1)
QUERIES = clustered(60, 2)
IDS = [str(uuid.UUID(int=i + 1)) for i in range(POINTS)]


def exact_top10(query: np.ndarray) -> set[str]:
    return {IDS[i] for i in np.argsort(-(VECTORS @ query), kind="stable")[:10]}


async def filled(root: Path, config: VectorIndexConfig) -> EdgeVectorStore:
    store = EdgeVectorStore(root, config)
    await store.create_collection("c", DIM, META)
    for start in range(0, POINTS, 500):
        await store.upsert("c", [
            StoredPoint(id=IDS[i], payload={"corpus": "docs@1", "source_path": f"d/{i}.md"},
                        dense=VECTORS[i].tolist(), sparse=SparseVector([i % 50, 100], [1.0, 0.5]))
            for i in range(start, min(POINTS, start + 500))])
    return store


async def dense_top10(store: EdgeVectorStore, query: np.ndarray) -> set[str]:
    hits = await store.hybrid_query(HybridQuery(collection="c", filter=FILTER, limit=10, dense=query.tolist()))
    return {h.id for h in hits}


async def recall(store: EdgeVectorStore) -> float:
    found = [len(await dense_top10(store, q) & exact_top10(q)) for q in QUERIES]
    return sum(found) / (10 * len(QUERIES))


def graphs(store: EdgeVectorStore) -> int:
    """Segments holding an HNSW graph of the dense vectors (the engine's own files)."""
    return len(list((store.root / "shards").rglob("vector_index-dense/hnsw_config.json")))


@pytest.mark.parametrize("quantization", ["none", "int8"])
async def test_a_collection_above_the_size_gets_a_graph_with_exact_top10_within_target(
        tmp_path: Path, quantization: str) -> None:
    store = await filled(tmp_path, VectorIndexConfig(hnsw_min_points=1000, quantization=quantization))
    try:
        assert graphs(store) == 0
        assert await recall(store) == 1.0  # before the graph: exact
        assert await store.build_index("c") is True
        assert graphs(store) >= 1
        assert await recall(store) >= 0.98
        # The hybrid answer keeps the port's scores: the dense score is the true cosine of the hit.
        query = QUERIES[0]
        hits = await store.hybrid_query(HybridQuery(collection="c", filter=FILTER, limit=10, dense=query.tolist(),
                                                    sparse=SparseVector([3], [1.0])))
        by_id = dict(zip(IDS, VECTORS))
        for hit in hits:
            if hit.dense is not None:
                assert hit.dense == pytest.approx(float(by_id[hit.id] @ query), abs=1e-5)
    finally:
        await store.close()


async def test_a_collection_below_the_size_stays_exact(tmp_path: Path) -> None:
    store = await filled(tmp_path, VectorIndexConfig(hnsw_min_points=POINTS + 1))
    try:
        assert await store.build_index("c") is False
        await store.set_alias("a", "c")
        assert not store.index_building("c")
        assert graphs(store) == 0
        assert await recall(store) == 1.0
    finally:
        await store.close()


async def test_an_alias_swap_builds_the_graph_in_the_background(tmp_path: Path) -> None:
    store = await filled(tmp_path, VectorIndexConfig(hnsw_min_points=1000))
    try:
        await store.set_alias("a", "c")
        # The alias serves at once, exactly at first, from the graph once it is there.
        hits = await store.hybrid_query(HybridQuery(collection="a", filter=FILTER, limit=10,
                                                    dense=QUERIES[0].tolist()))
        assert len(hits) == 10
        assert await store.build_index("a") is True  # waits for the build the swap started
        assert graphs(store) >= 1
    finally:
        await store.close()


async def test_the_graph_survives_a_reopen(tmp_path: Path) -> None:
    config = VectorIndexConfig(hnsw_min_points=1000)
    store = await filled(tmp_path, config)
    await store.build_index("c")
    await store.close()
    reopened = EdgeVectorStore(tmp_path, config)
    try:
        assert await recall(reopened) >= 0.98
        assert graphs(reopened) >= 1
    finally:
        await reopened.close()
