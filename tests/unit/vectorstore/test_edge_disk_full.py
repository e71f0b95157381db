"""A disk that fills up under the embedded store: the build's write fails with a clear error, the
active index keeps serving, nothing stored is lost, and the process lives.

The engine memory-maps its files; on a full disk a write through a mapping is SIGBUS, which kills
the process that serves the active index (seen with qdrant-edge 0.9.0 on a 20 MB tmpfs). So the
store checks the free space before each write and each graph build.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from vectorstore_fixtures import META, point

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.vectorstore.edge import EdgeVectorStore
from ragmesh_common.vectorstore.index_config import VectorIndexConfig
from ragmesh_common.vectorstore.port import HybridQuery, PointFilter

MB = 1024 * 1024
FILTER = PointFilter(corpora=("docs@1",))


class Disk:
    """A disk whose free space the test sets."""

    def __init__(self, free: int) -> None:
        self.free = free

    def __call__(self, path: Path) -> int:
        return self.free


async def serving(store: EdgeVectorStore) -> list[str]:
    hits = await store.hybrid_query(HybridQuery(collection="docs", filter=FILTER, limit=10, dense=[1.0, 0.0, 0.0]))
    return sorted(h.id for h in hits)


async def test_a_build_on_a_full_disk_fails_clearly_and_the_active_index_keeps_serving(tmp_path: Path) -> None:
    disk = Disk(10_000 * MB)
    store = EdgeVectorStore(tmp_path, VectorIndexConfig(min_free_mb=100), free_bytes=disk)
    active = [point(f"a/{i}.md", [1.0, i / 10, 0.0]) for i in range(5)]
    await store.create_collection("v1", 3, META)
    await store.upsert("v1", active)
    await store.set_alias("docs", "v1")
    before = await serving(store)
    await store.create_collection("v2", 3, META)
    await store.upsert("v2", [point("b/0.md", [0.0, 1.0, 0.0])])

    disk.free = 101 * MB  # less than the reserve plus what the engine's sized files may still take
    with pytest.raises(RagmeshError) as exc:
        await store.upsert("v2", [point(f"b/{i}.md", [0.0, 1.0, 0.0]) for i in range(1, 300)])
    assert exc.value.code == ErrorCode.UNAVAILABLE
    assert exc.value.details["reason"] == "disk_full"
    assert "disk is full" in exc.value.message and "RAGMESH_EDGE_MIN_FREE_MB" in exc.value.message
    assert await store.count("v2") == 1  # nothing of the refused batch went in
    assert await serving(store) == before
    with pytest.raises(RagmeshError) as created:
        await store.create_collection("v3", 3, META)
    assert created.value.details["reason"] == "disk_full"
    assert await store.delete_collection("v2")  # the failed build cleans up as it always did
    await store.close()

    reopened = EdgeVectorStore(tmp_path)
    try:
        assert await reopened.get_aliases() == {"docs": "v1"}
        assert await serving(reopened) == before
        assert sorted(await reopened.list_collections()) == ["v1"]
    finally:
        await reopened.close()


async def test_a_graph_build_needs_room_for_a_second_copy(tmp_path: Path) -> None:
    disk = Disk(10_000 * MB)
    store = EdgeVectorStore(tmp_path, VectorIndexConfig(hnsw_min_points=10, min_free_mb=100), free_bytes=disk)
    try:
        await store.create_collection("v1", 3, META)
        await store.upsert("v1", [point(f"a/{i}.md", [1.0, i / 10, 0.0]) for i in range(20)])
        disk.free = 101 * MB
        with pytest.raises(RagmeshError) as exc:
            await store.build_index("v1")
        assert exc.value.details["reason"] == "disk_full"
        assert len(await store.hybrid_query(HybridQuery(collection="v1", filter=FILTER, limit=5,
                                                        dense=[1.0, 0.0, 0.0]))) == 5  # exact meanwhile
        disk.free = 10_000 * MB
        assert await store.build_index("v1") is True  # a later try builds it
    finally:
        await store.close()


# Run with this folder as its working directory: ``python -c`` imports from there (vectorstore_fixtures).
FILL_A_TMPFS = textwrap.dedent("""
    import asyncio, sys, uuid
    from vectorstore_fixtures import META, point
    from ragmesh_common.errors import RagmeshError
    from ragmesh_common.vectorstore.edge import EdgeVectorStore
    from ragmesh_common.vectorstore.index_config import VectorIndexConfig

    async def main():
        store = EdgeVectorStore(sys.argv[1], VectorIndexConfig(min_free_mb=8))
        await store.create_collection("v1", 384, META)
        try:
            for _ in range(10_000):
                await store.upsert("v1", [point("a.md", [1.0] * 384, quote="x" * 2000) for _ in range(256)])
        except RagmeshError as exc:
            print("refused", exc.details.get("reason"), await store.count("v1") > 0)
        await store.close()

    asyncio.run(main())
""")


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_real_full_disk_does_not_kill_the_process(tmp_path: Path) -> None:
    mount = tmp_path / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=320m", "tmpfs", str(mount)]).returncode != 0:
        pytest.skip("this machine cannot mount a tmpfs")
    try:
        done = subprocess.run([sys.executable, "-c", FILL_A_TMPFS, str(mount / "edge")], cwd=Path(__file__).parent,
                              capture_output=True, text=True, timeout=240)
    finally:
        subprocess.run(["umount", str(mount)])
    assert done.returncode == 0, done.stderr[-2000:]  # -7 (SIGBUS) before the free-space check
    assert done.stdout.split() == ["refused", "disk_full", "True"]
