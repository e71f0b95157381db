"""What only the Qdrant Edge adapter has: its catalog file, the one-process lock, folder hygiene, and
answers equal to local mode's on the same random data."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from qdrant_client import QdrantClient
from vectorstore_fixtures import META, point

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.vectorstore import edge_catalog
from ragmesh_common.vectorstore.edge import EdgeVectorStore
from ragmesh_common.vectorstore.port import HybridQuery, PointFilter, SparseVector, StoredPoint, VectorStorePort
from ragmesh_common.vectorstore.qdrant import QdrantVectorStore


@pytest.fixture
async def edge(tmp_path: Path):  # type: ignore[no-untyped-def]
    store = EdgeVectorStore(tmp_path / "edge")
    yield store
    await store.close()


async def test_one_process_at_a_time(tmp_path: Path) -> None:
    first = EdgeVectorStore(tmp_path)
    assert first.kind == "qdrant-edge"
    with pytest.raises(RagmeshError) as exc:
        EdgeVectorStore(tmp_path)
    assert exc.value.code == ErrorCode.UNAVAILABLE and "another process" in exc.value.message
    await first.close()
    second = EdgeVectorStore(tmp_path)  # the lock goes with close
    await second.close()


async def test_a_closed_store_is_unavailable(edge: EdgeVectorStore) -> None:
    await edge.close()
    with pytest.raises(RagmeshError) as exc:
        await edge.list_collections()
    assert exc.value.code == ErrorCode.UNAVAILABLE


async def test_catalog_is_one_json_file_replaced_whole(edge: EdgeVectorStore) -> None:
    await edge.create_collection("c1", 3, META)
    await edge.set_alias("a", "c1")
    catalog = json.loads((edge.root / "catalog.json").read_text())
    assert catalog["aliases"] == {"a": "c1"}
    assert catalog["collections"]["c1"]["metadata"]["index_version"] == "v1"
    assert not list(edge.root.glob("*.tmp"))


async def test_a_failed_alias_write_changes_nothing(edge: EdgeVectorStore, monkeypatch: pytest.MonkeyPatch) -> None:
    await edge.create_collection("c1", 3, META)
    await edge.create_collection("c2", 3, META)
    await edge.set_alias("a", "c1")

    def disk_full(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(edge_catalog.os, "replace", disk_full)
    with pytest.raises(RagmeshError) as exc:
        await edge.set_alias("a", "c2")
    assert exc.value.code == ErrorCode.UNAVAILABLE
    monkeypatch.undo()
    assert await edge.get_aliases() == {"a": "c1"}
    assert json.loads((edge.root / "catalog.json").read_text())["aliases"] == {"a": "c1"}


async def test_shard_folders_are_fresh_and_swept(tmp_path: Path) -> None:
    store = EdgeVectorStore(tmp_path)
    await store.create_collection("c", 3, META)
    await store.upsert("c", [point("a.md", [1.0, 0.0, 0.0])])
    first = {p.name for p in (tmp_path / "shards").iterdir()}
    assert await store.delete_collection("c")
    assert not list((tmp_path / "shards").iterdir())
    await store.create_collection("c", 3, META)
    second = {p.name for p in (tmp_path / "shards").iterdir()}
    assert len(second) == 1 and second != first
    await store.close()
    (tmp_path / "shards" / "left-by-a-crash").mkdir()
    reopened = EdgeVectorStore(tmp_path)
    try:
        assert {p.name for p in (tmp_path / "shards").iterdir()} == second
        assert await reopened.count("c") == 0
    finally:
        await reopened.close()


async def test_unreadable_catalog_refuses_to_open(tmp_path: Path) -> None:
    (tmp_path / "catalog.json").write_text("{not json")
    with pytest.raises(RagmeshError) as exc:
        EdgeVectorStore(tmp_path)
    assert exc.value.code == ErrorCode.UNAVAILABLE
    fd = os.open(tmp_path / "lock", os.O_RDWR)  # and the lock was given back
    os.close(fd)
    (tmp_path / "catalog.json").unlink()
    await EdgeVectorStore(tmp_path).close()


def random_points(rng: np.random.Generator) -> list[StoredPoint]:
    points = []
    for i in range(300):
        terms = np.sort(rng.choice(200, size=int(rng.integers(1, 12)), replace=False))
        points.append(point(
            f"docs/{'ab'[i % 2]}/{i}.md", rng.standard_normal(16).tolist(),
            corpus=("docs@1", "other@1", "third@1")[i % 3], tags=[f"t{i % 4}", f"t{i % 5}"],
            sparse=SparseVector(indices=terms.tolist(), values=rng.uniform(0.1, 3.0, len(terms)).tolist()),
        ))
    return points


async def fill(store: VectorStorePort, points: list[StoredPoint]) -> None:
    await store.create_collection("c", 16, META)
    for start in range(0, len(points), 64):
        await store.upsert("c", points[start:start + 64])


def same_scores(mine: list[float | None], theirs: list[float | None], **tolerance: float) -> bool:
    if [x is None for x in mine] != [x is None for x in theirs]:
        return False
    return [x for x in mine if x is not None] == pytest.approx([x for x in theirs if x is not None], **tolerance)


async def test_answers_equal_local_mode_on_random_data(edge: EdgeVectorStore) -> None:
    local = QdrantVectorStore(QdrantClient(":memory:"))
    try:
        points = random_points(np.random.default_rng(7))
        await fill(local, points)
        await fill(edge, points)
        rng = np.random.default_rng(11)
        filters = [PointFilter(corpora=("docs@1", "other@1")), PointFilter(corpora=("docs@1",), tags=("t1",)),
                   PointFilter(corpora=("docs@1", "other@1", "third@1"), path_prefix="docs/a")]
        compared = 0
        for i in range(30):
            dense = rng.standard_normal(16).tolist()
            terms = np.sort(rng.choice(200, size=4, replace=False)).tolist()
            sparse = SparseVector(indices=terms, values=[1.0] * 4)
            for dense_part, sparse_part in ((dense, sparse), (dense, None), (None, sparse)):
                query = HybridQuery(collection="c", filter=filters[i % 3], limit=10, dense=dense_part,
                                    sparse=sparse_part, candidates=20)
                mine, theirs = await edge.hybrid_query(query), await local.hybrid_query(query)
                assert [h.id for h in mine] == [h.id for h in theirs]
                assert [h.fused for h in mine] == [h.fused for h in theirs]
                assert [h.payload for h in mine] == [h.payload for h in theirs]
                assert same_scores([h.dense for h in mine], [h.dense for h in theirs], abs=1e-5)
                assert same_scores([h.sparse for h in mine], [h.sparse for h in theirs], rel=1e-4)
                compared += len(mine)
        assert compared > 600
    finally:
        await local.close()
