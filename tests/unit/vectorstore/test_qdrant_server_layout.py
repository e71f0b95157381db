"""The Qdrant server adapter creates collections with the layout the settings name (HNSW, int8
quantization, on_disk, shards, replicas, write consistency) and searches with ``ef`` and rescoring;
a layout the cluster cannot place fails with a clear error and leaves no half-made collection.

The server is a fake with qdrant-client's own types and error class: this machine runs no Qdrant
server (docs/operations.md says how to check the same on a real cluster)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http import models as rest
from qdrant_client.http.exceptions import UnexpectedResponse
from vectorstore_fixtures import META

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.vectorstore.index_config import VectorIndexConfig
from ragmesh_common.vectorstore.port import HybridQuery, PointFilter, SparseVector
from ragmesh_common.vectorstore.qdrant import QdrantVectorStore


class FakeCluster(AsyncQdrantClient):
    """A cluster of ``peers`` nodes that, like Qdrant, accepts a replication factor above its node
    count and places one replica per node at most (qdrant/qdrant#5215); ``refuse`` makes the create
    itself answer 400 with that text."""

    def __init__(self, peers: int = 3, refuse: str = "") -> None:  # no connection: nothing to reach
        self.peers = peers
        self.refuse = refuse
        self.created: dict[str, dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.queries: list[dict[str, Any]] = []

    async def collection_exists(self, name: str, **_: Any) -> bool:
        return name in self.created

    async def create_collection(self, name: str, **kwargs: Any) -> bool:
        if self.refuse:
            body = json.dumps({"status": {"error": self.refuse}, "time": 0.0}).encode()
            raise UnexpectedResponse(400, "Bad Request", body, httpx.Headers())
        self.created[name] = kwargs
        return True

    async def collection_cluster_info(self, name: str, **_: Any) -> models.CollectionClusterInfo:
        kwargs = self.created[name]
        replicas = min(kwargs["replication_factor"], self.peers)
        local, remote = [], []
        for shard in range(kwargs["shard_number"]):
            for copy in range(replicas):
                peer = (shard + copy) % self.peers
                if peer == 0:
                    local.append(models.LocalShardInfo(shard_id=shard, points_count=0, state=models.ReplicaState.ACTIVE))
                else:
                    remote.append(models.RemoteShardInfo(shard_id=shard, peer_id=peer, state=models.ReplicaState.ACTIVE))
        return models.CollectionClusterInfo(peer_id=0, shard_count=kwargs["shard_number"], local_shards=local,
                                            remote_shards=remote, shard_transfers=[])

    async def create_payload_index(self, name: str, key: str, **_: Any) -> None:
        return None

    async def get_collection(self, name: str, **_: Any) -> Any:
        class Info:
            class config:  # noqa: N801 - the shape qdrant-client returns
                metadata = self.created[name]["metadata"]
        return Info

    async def delete_collection(self, name: str, **_: Any) -> bool:
        self.deleted.append(name)
        return self.created.pop(name, None) is not None

    async def query_points(self, name: str, **kwargs: Any) -> rest.QueryResponse:
        self.queries.append(kwargs)
        return rest.QueryResponse(points=[])


CONFIG = VectorIndexConfig(hnsw_m=24, hnsw_ef_construct=150, hnsw_ef=96, hnsw_min_points=40_000, quantization="int8",
                           oversampling=3.0, on_disk=True, shard_number=6, replication_factor=2,
                           write_consistency_factor=2)


async def test_the_settings_reach_the_servers_create_call() -> None:
    server = FakeCluster(peers=3)
    store = QdrantVectorStore(server, CONFIG)
    assert store.kind == "qdrant-server"
    await store.create_collection("c", 384, META)
    made = server.created["c"]
    assert (made["shard_number"], made["replication_factor"], made["write_consistency_factor"]) == (6, 2, 2)
    assert made["hnsw_config"] == models.HnswConfigDiff(m=24, ef_construct=150, payload_m=0, on_disk=True)
    assert made["vectors_config"]["dense"].on_disk is True
    assert made["quantization_config"].scalar.type == models.ScalarType.INT8
    assert made["optimizers_config"].indexing_threshold == 40_000 * 384 * 4 // 1024
    assert made["metadata"]["index_version"] == "v1"


async def test_searches_ask_for_ef_and_rescoring() -> None:
    server = FakeCluster()
    store = QdrantVectorStore(server, CONFIG)
    query_filter = PointFilter(corpora=("docs@1",))
    await store.hybrid_query(HybridQuery(collection="c", filter=query_filter, limit=10, dense=[1.0, 0.0]))
    params = server.queries[-1]["search_params"]
    assert params.hnsw_ef == 96
    assert (params.quantization.rescore, params.quantization.oversampling) == (True, 3.0)
    await store.hybrid_query(HybridQuery(collection="c", filter=query_filter, limit=10, dense=[1.0, 0.0],
                                         sparse=SparseVector([1], [1.0]), candidates=200))
    dense_prefetch = server.queries[-1]["prefetch"][0]
    assert dense_prefetch.params.hnsw_ef == 200  # never fewer than the candidates asked for


async def test_replicas_the_cluster_cannot_place_fail_the_create_and_leave_nothing() -> None:
    server = FakeCluster(peers=1)  # one node cannot hold a second copy
    store = QdrantVectorStore(server, CONFIG)
    with pytest.raises(RagmeshError) as exc:
        await store.create_collection("c", 384, META)
    error = exc.value
    assert error.code == ErrorCode.INVALID_ARGUMENT
    assert error.details["reason"] == "shards_unplaced" and error.details["placed"] == 6
    assert "RAGMESH_QDRANT_REPLICATION_FACTOR=2" in error.message and "12 were asked for" in error.message
    assert server.deleted == ["c"] and not server.created


async def test_a_create_the_server_refuses_names_the_settings_and_the_servers_reason() -> None:
    server = FakeCluster(refuse="Bad request: shard_number 100 exceeds the maximum")
    store = QdrantVectorStore(server, VectorIndexConfig(shard_number=100))
    with pytest.raises(RagmeshError) as exc:
        await store.create_collection("c", 384, META)
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT
    assert "RAGMESH_QDRANT_SHARD_NUMBER=100" in exc.value.message
    assert "shard_number 100 exceeds the maximum" in exc.value.message
    assert not server.created


async def test_one_shard_one_copy_needs_no_placement_check() -> None:
    server = FakeCluster(peers=1)
    store = QdrantVectorStore(server, VectorIndexConfig())
    await store.create_collection("c", 384, META)
    made = server.created["c"]
    assert (made["shard_number"], made["replication_factor"], made["quantization_config"]) == (1, 1, None)
