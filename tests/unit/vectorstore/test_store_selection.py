"""RAGMESH_VECTOR_STORE picks the retrieval process's adapter; the edge default serves a real search
through the retrieval gRPC server (in-process), written the way the indexer writes: over gRPC."""

from __future__ import annotations

import hashlib
import re
import uuid
from pathlib import Path

import msgspec
import numpy as np
import pytest
from ragmesh.v1 import retrieval_pb2, retrieval_pb2_grpc

from ragmesh_common.index_schema import ChunkPayload, CollectionMeta, CorpusMeta, alias_name, collection_name
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.rpc.client import open_channel, unary
from ragmesh_common.vectorstore.edge import EdgeVectorStore
from ragmesh_common.vectorstore.grpc_store import GrpcVectorStore
from ragmesh_common.vectorstore.port import SparseVector, StoredPoint
from ragmesh_common.vectorstore.qdrant import QdrantVectorStore

from ragmesh_retrieval.app import RetrievalApp, open_store
from ragmesh_retrieval.domain.embedding import Embedder
from ragmesh_retrieval.settings import load_settings

STORE_VARIABLES = ("RAGMESH_VECTOR_STORE", "RAGMESH_QDRANT_URL", "RAGMESH_EDGE_PATH", "RAGMESH_QDRANT_PATH",
                   "RAGMESH_RETRIEVAL_SERVE_VECTORSTORE")


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in STORE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGMESH_STATE_DIR", str(tmp_path / "state"))
    return monkeypatch


def test_edge_is_the_embedded_default(env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = load_settings()
    assert (settings.vector_store, settings.store_kind, settings.serve_vectorstore) == ("edge", "qdrant-edge", True)
    assert settings.edge_path == str((tmp_path / "state" / "qdrant-edge").resolve())


@pytest.mark.parametrize(
    ("variables", "store", "served"),
    [
        ({"RAGMESH_VECTOR_STORE": "local"}, "local", True),
        ({"RAGMESH_VECTOR_STORE": " Edge "}, "edge", True),
        ({"RAGMESH_QDRANT_URL": "http://qdrant:6333"}, "server", False),
        ({"RAGMESH_VECTOR_STORE": "server", "RAGMESH_QDRANT_URL": "http://qdrant:6333"}, "server", False),
    ],
)
def test_store_choice(env: pytest.MonkeyPatch, variables: dict, store: str, served: bool) -> None:
    for name, value in variables.items():
        env.setenv(name, value)
    settings = load_settings()
    assert (settings.vector_store, settings.serve_vectorstore) == (store, served)


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"RAGMESH_VECTOR_STORE": "faiss"}, "is not one of edge, local, server"),
        ({"RAGMESH_VECTOR_STORE": "server"}, "RAGMESH_QDRANT_URL is not set"),
        ({"RAGMESH_VECTOR_STORE": "edge", "RAGMESH_QDRANT_URL": "http://q:6333"}, "the indexer would write"),
    ],
)
def test_contradictory_store_settings_stop_the_process(env: pytest.MonkeyPatch, variables: dict,
                                                        message: str) -> None:
    for name, value in variables.items():
        env.setenv(name, value)
    with pytest.raises(SystemExit) as exc:
        load_settings()
    assert message in str(exc.value)


async def test_open_store_builds_the_chosen_adapter(env: pytest.MonkeyPatch) -> None:
    edge = open_store(load_settings())
    assert isinstance(edge, EdgeVectorStore) and edge.kind == "qdrant-edge"
    with pytest.raises(SystemExit) as exc:
        open_store(load_settings())
    assert "open in another process" in str(exc.value)
    await edge.close()
    env.setenv("RAGMESH_VECTOR_STORE", "local")
    local = open_store(load_settings())
    assert isinstance(local, QdrantVectorStore) and local.kind == "qdrant-local"
    await local.close()


DIMENSIONS = 32
MODEL = "test/words-32"
CORPUS = "handbook@1"
PAGES = {
    "docs/ops/backup.md": "Backups run nightly and are kept for thirty days",
    "docs/ops/restore.md": "Restore a backup with the restore command and a snapshot id",
    "docs/dev/testing.md": "Run the test suite before opening a pull request",
}


def words_vector(text: str) -> list[float]:
    total = np.zeros(DIMENSIONS)
    for word in re.findall(r"\w+", text.lower()):
        seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        total += np.random.default_rng(seed).standard_normal(DIMENSIONS)
    return (total / np.linalg.norm(total)).tolist()


class WordsEmbedder(Embedder):
    async def model_id(self) -> str:
        return MODEL

    async def embed_query(self, text: str) -> list[float]:
        return words_vector(text)


async def test_retrieval_serves_search_from_the_edge_store(env: pytest.MonkeyPatch) -> None:
    env.setenv("RAGMESH_RETRIEVAL_METRICS_PORT", "0")
    app = RetrievalApp(load_settings(port=0, host="127.0.0.1"), embedder=WordsEmbedder())
    port = await app.start()
    try:
        async with open_channel(f"127.0.0.1:{port}") as channel:
            store = GrpcVectorStore(channel)
            encoder = LexicalEncoder()
            sparse, avg_len = encoder.encode_documents(list(PAGES.values()))
            name = collection_name(CORPUS, "v1")
            await store.create_collection(name, DIMENSIONS, CollectionMeta(
                index_version="v1", corpus=CorpusMeta(corpus=CORPUS, library="handbook", version="1"),
                embedding_model=MODEL, vector_size=DIMENSIONS, lexical_version=encoder.version,
                lexical_config=encoder.config_dict(), avg_len=avg_len, documents=3, chunks=3))
            ids = {path: str(uuid.uuid4()) for path in PAGES}
            await store.upsert(name, [
                StoredPoint(id=ids[path], dense=words_vector(text),
                            sparse=SparseVector(indices=vector.indices, values=vector.values),
                            payload=msgspec.to_builtins(ChunkPayload(
                                chunk_id=ids[path], parent_id=ids[path], doc_id=path, corpus=CORPUS,
                                library="handbook", version="1", title=path, heading_path=[], url="",
                                quote=text, source_path=path)))
                for (path, text), vector in zip(PAGES.items(), sparse)
            ])
            await store.set_alias(alias_name(CORPUS), name)
            stub = retrieval_pb2_grpc.RetrievalStub(channel)
            reply = await unary(stub.Search, retrieval_pb2.SearchRequest(
                query="restore a snapshot", top_k=2, readable_corpora=[CORPUS], include_content=True),
                timeout=10, peer="retrieval")
            stats = await unary(stub.Stats, retrieval_pb2.StatsRequest(readable_corpora=[CORPUS]),
                                timeout=10, peer="retrieval")
        assert reply.query_mode == "hybrid"
        assert reply.results[0].chunk.chunk_id == ids["docs/ops/restore.md"]
        assert {"fused", "dense"} <= set(reply.results[0].scores)
        assert (stats.points, stats.store) == (3, "qdrant-edge")
    finally:
        await app.stop()
