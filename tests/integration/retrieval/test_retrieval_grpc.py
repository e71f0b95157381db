"""The real retrieval gRPC server in-process, over qdrant-client local mode in a temp dir.

The indexer's path is exercised as it will run in the embedded default: collections are written
through GrpcVectorStore (the ragmesh.v1.VectorStore service), the alias is swapped, then clients
use ragmesh.v1.Retrieval. Query embeddings come from a tiny TEI-compatible HTTP server defined here
(test-only: deterministic bag-of-words vectors), so the real TeiClient/TeiEmbedder path runs without
a model.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import msgspec
import numpy as np
import pytest
import uvicorn
from ragmesh.v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc

from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.embedders.identity import EmbedderIdentity
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import ChunkPayload, CollectionMeta, CorpusMeta, alias_name, collection_name
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.rpc.client import open_channel, unary
from ragmesh_common.rpc.errors import CODE_KEY, DETAILS_KEY
from ragmesh_common.vectorstore.grpc_store import GrpcVectorStore
from ragmesh_common.vectorstore.port import HybridQuery, PointFilter, SparseVector, StoredPoint

from ragmesh_retrieval.app import RetrievalApp
from ragmesh_retrieval.domain.model import SearchLimits
from ragmesh_retrieval.settings import RetrievalSettings
from loopback_server import read_body

MODEL_ID = "test/bag-of-words-64"
DIMENSIONS = 64
CORPUS = "handbook@1.0"
_WORD = re.compile(r"\w+")

PAGES = [
    ("docs/ops/backup.md", "Backups run nightly and are kept for thirty days in the archive bucket", ["ops"]),
    ("docs/ops/restore.md", "Restore a backup with the restore command and a snapshot id", ["ops"]),
    ("docs/dev/testing.md", "Run the test suite with make test before opening a pull request", ["dev"]),
]


def embed_text(text: str) -> list[float]:
    total = np.zeros(DIMENSIONS)
    for word in _WORD.findall(text.lower()):
        seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        total += np.random.default_rng(seed).standard_normal(DIMENSIONS)
    norm = np.linalg.norm(total)
    return (total / norm if norm else total).tolist()


async def fake_tei(scope, receive, send) -> None:  # a minimal ASGI app speaking TEI's /info, /embed
    body = await read_body(receive)
    if scope["path"] == "/info":
        payload, status = {"model_id": MODEL_ID}, 200
    elif scope["path"] == "/embed":
        payload, status = [embed_text(t) for t in msgspec.json.decode(body)["inputs"]], 200
    else:
        payload, status = {"error": "not found"}, 404
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": msgspec.json.encode(payload)})


@pytest.fixture
async def tei_url() -> AsyncIterator[str]:
    server = uvicorn.Server(uvicorn.Config(fake_tei, host="127.0.0.1", port=0, lifespan="off", log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    server.should_exit = True
    await task


def settings_for(tmp_path: Path, embed_url: str) -> RetrievalSettings:
    return RetrievalSettings(
        host="127.0.0.1", port=0, metrics_port=None, qdrant_url="", qdrant_api_key="",
        qdrant_path=str(tmp_path / "qdrant"), embed_url=embed_url, embed_cache_entries=64,
        catalog_ttl_s=60.0, serve_vectorstore=True, limits=SearchLimits(embed_timeout_s=2.0),
    )


@pytest.fixture
async def retrieval(tmp_path: Path, tei_url: str) -> AsyncIterator[tuple[str, RetrievalApp]]:
    app = RetrievalApp(settings_for(tmp_path, tei_url))
    port = await app.start()
    yield f"127.0.0.1:{port}", app
    await app.stop()


async def index_through_grpc(target: str, tei_url: str, index_version: str = "v1",
                             embedder: EmbedderIdentity | None = None) -> dict[str, str]:
    """What the indexer does in the embedded default; returns source_path -> chunk id."""
    encoder = LexicalEncoder()
    texts = [text for _, text, _ in PAGES]
    sparse, avg_len = encoder.encode_documents(texts)
    tei = TeiClient(tei_url)
    dense = await tei.embed(texts)
    meta = CollectionMeta(
        index_version=index_version,
        corpus=CorpusMeta(corpus=CORPUS, library="handbook", version="1.0", license="CC-BY-4.0",
                          source_url="https://example.org/handbook"),
        embedding_model=await tei.model_id(), vector_size=DIMENSIONS, lexical_version=encoder.version,
        lexical_config=encoder.config_dict(), avg_len=avg_len, documents=len(PAGES), chunks=len(PAGES),
        embedder=embedder,
    )
    await tei.close()
    ids = {path: str(uuid.uuid4()) for path, _, _ in PAGES}
    points = [
        StoredPoint(
            id=ids[path],
            payload=msgspec.to_builtins(ChunkPayload(
                chunk_id=ids[path], parent_id=ids[path], doc_id=path, corpus=CORPUS, library="handbook",
                version="1.0", title=path, heading_path=["Handbook"], url=f"https://example.org/{path}",
                quote=text, source_path=path, line_start=1, line_end=1, tags=tags,
                parent_content=f"# Section\n{text}",
            )),
            dense=vector,
            sparse=SparseVector(indices=s.indices, values=s.values),
        )
        for (path, text, tags), vector, s in zip(PAGES, dense, sparse)
    ]
    channel = open_channel(target)
    store = GrpcVectorStore(channel)
    name = collection_name(CORPUS, index_version)
    await store.create_collection(name, DIMENSIONS, meta)
    await store.upsert(name, points)
    assert await store.count(name) == len(PAGES)
    info = await store.get_collection(name)
    assert info.exists and msgspec.json.encode(info.metadata) == msgspec.json.encode(meta)
    await store.set_alias(alias_name(CORPUS), name)
    assert (await store.get_aliases())[alias_name(CORPUS)] == name
    page, _ = await store.scroll(name, ids=[ids["docs/ops/backup.md"]], with_vectors=True)
    assert page[0].dense is not None and page[0].payload["path_prefixes"][-1] == "docs/ops/backup.md"
    # The indexer's probe gate: the same hybrid query retrieval runs, on the collection itself.
    probe = "restore a snapshot"
    hits = await store.hybrid_query(HybridQuery(
        collection=name, filter=PointFilter(corpora=(CORPUS,), tags=("ops",)), limit=2,
        dense=embed_text(probe), sparse=SparseVector(**msgspec.to_builtins(encoder.encode_query(probe))),
    ))
    assert hits[0].id == ids["docs/ops/restore.md"] and hits[0].dense is not None and hits[0].sparse > 0
    assert {h.payload["source_path"] for h in hits} <= {"docs/ops/backup.md", "docs/ops/restore.md"}
    await channel.close()
    return ids


async def test_index_through_vectorstore_then_search_read_and_list(retrieval, tei_url: str) -> None:
    target, _ = retrieval
    ids = await index_through_grpc(target, tei_url)
    async with open_channel(target) as channel:
        stub = retrieval_pb2_grpc.RetrievalStub(channel)
        reply = await unary(stub.Search, retrieval_pb2.SearchRequest(
            query="how long are backups kept", top_k=3, readable_corpora=[CORPUS], include_content=True,
            filters=common_pb2.SearchFilters(path_prefix="docs/ops"),
        ), timeout=10, peer="retrieval")
        assert reply.query_mode == "hybrid" and list(reply.degraded) == []
        assert list(reply.index_versions) == ["v1"]
        top = reply.results[0]
        assert top.chunk.chunk_id == ids["docs/ops/backup.md"]
        assert top.chunk.content.startswith("# Section") and top.chunk.quote.startswith("Backups run nightly")
        assert {"fused", "dense"} <= set(top.scores)
        assert {r.chunk.source_path for r in reply.results} <= {"docs/ops/backup.md", "docs/ops/restore.md"}

        batch = await unary(stub.BatchGetChunks, retrieval_pb2.BatchGetChunksRequest(
            chunk_ids=[ids["docs/dev/testing.md"], str(uuid.uuid4())], index_version="v1",
            readable_corpora=[CORPUS],
        ), timeout=10, peer="retrieval")
        assert [c.source_path for c in batch.chunks] == ["docs/dev/testing.md"]
        assert len(batch.missing) == 1

        corpora = await unary(stub.ListCorpora, retrieval_pb2.ListCorporaRequest(readable_corpora=[CORPUS]),
                              timeout=10, peer="retrieval")
        assert [(c.corpus, c.active_index_version, c.points, c.state) for c in corpora.corpora] == [
            (CORPUS, "v1", len(PAGES), "active")
        ]
        stats = await unary(stub.Stats, retrieval_pb2.StatsRequest(readable_corpora=[CORPUS]),
                            timeout=10, peer="retrieval")
        assert (stats.corpora, stats.points, stats.embedding_model, stats.store) == (
            1, len(PAGES), MODEL_ID, "qdrant-local")
        hidden = await unary(stub.ListCorpora, retrieval_pb2.ListCorporaRequest(readable_corpora=["other@1"]),
                             timeout=10, peer="retrieval")
        assert list(hidden.corpora) == []


async def test_an_index_from_an_undeclared_embedder_is_keyword_only_and_says_why(retrieval, tei_url: str) -> None:
    built_by = EmbedderIdentity(model="other/embedder", revision="a" * 40, dtype="float32", pooling="mean",
                                dimension=DIMENSIONS, normalization="l2")
    await index_through_grpc(target := retrieval[0], tei_url, embedder=built_by)
    async with open_channel(target) as channel:
        stub = retrieval_pb2_grpc.RetrievalStub(channel)
        reply = await unary(stub.Search, retrieval_pb2.SearchRequest(
            query="how long are backups kept", top_k=3, readable_corpora=[CORPUS]), timeout=10, peer="retrieval")
        assert (reply.query_mode, list(reply.degraded)) == ("sparse", ["embedding_model"])
        assert f"{CORPUS} is searched by keywords only" in reply.hint and built_by.label in reply.hint
        [listed] = (await unary(stub.ListCorpora, retrieval_pb2.ListCorporaRequest(readable_corpora=[CORPUS]),
                                timeout=10, peer="retrieval")).corpora
    assert (listed.embedder, listed.search) == (built_by.label, "keyword_only")
    assert built_by.label in listed.keyword_only_reason and MODEL_ID in listed.keyword_only_reason
    assert "not declared compatible" in listed.keyword_only_reason


@pytest.mark.parametrize(
    ("request_fields", "status", "code"),
    [
        ({"query": "   ", "top_k": 3}, grpc.StatusCode.INVALID_ARGUMENT, "QUERY_EMPTY"),
        ({"query": "x" * 2001, "top_k": 3}, grpc.StatusCode.INVALID_ARGUMENT, "QUERY_TOO_LONG"),
        ({"query": "backups", "top_k": 0}, grpc.StatusCode.INVALID_ARGUMENT, "TOP_K_OUT_OF_RANGE"),
        ({"query": "back\x00ups", "top_k": 3}, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_ARGUMENT"),
        ({"query": "backups", "top_k": 3, "filters": common_pb2.SearchFilters(library="nope")},
         grpc.StatusCode.NOT_FOUND, "NOT_FOUND"),
    ],
)
async def test_bad_search_input_maps_to_status_and_stable_code(
    retrieval, tei_url: str, request_fields: dict, status: grpc.StatusCode, code: str
) -> None:
    target, _ = retrieval
    await index_through_grpc(target, tei_url)
    async with open_channel(target) as channel:
        stub = retrieval_pb2_grpc.RetrievalStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as exc:
            await stub.Search(retrieval_pb2.SearchRequest(readable_corpora=[CORPUS], **request_fields), timeout=10)
        assert exc.value.code() == status
        assert dict(exc.value.trailing_metadata() or ())[CODE_KEY] == code


async def test_batch_get_errors_carry_their_codes(retrieval, tei_url: str) -> None:
    target, _ = retrieval
    ids = await index_through_grpc(target, tei_url)
    async with open_channel(target) as channel:
        stub = retrieval_pb2_grpc.RetrievalStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as gone:
            await stub.BatchGetChunks(retrieval_pb2.BatchGetChunksRequest(
                chunk_ids=[ids["docs/ops/backup.md"]], index_version="v0", readable_corpora=[CORPUS]), timeout=10)
        assert gone.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert dict(gone.value.trailing_metadata())[CODE_KEY] == "INDEX_VERSION_GONE"
        with pytest.raises(RagmeshError) as malformed:
            await unary(stub.BatchGetChunks, retrieval_pb2.BatchGetChunksRequest(
                chunk_ids=["nope"], index_version="v1", readable_corpora=[CORPUS]), timeout=10, peer="retrieval")
        assert malformed.value.code == ErrorCode.MALFORMED_CHUNK_ID
        with pytest.raises(grpc.aio.AioRpcError) as too_many:
            await stub.BatchGetChunks(retrieval_pb2.BatchGetChunksRequest(
                chunk_ids=[str(uuid.uuid4()) for _ in range(21)], index_version="v1",
                readable_corpora=[CORPUS]), timeout=10)
        assert too_many.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        meta = dict(too_many.value.trailing_metadata())
        assert meta[CODE_KEY] == "TOO_MANY_IDS" and '"max": 20' in meta[DETAILS_KEY]


async def test_embedding_runtime_down_degrades_over_grpc(tmp_path: Path, tei_url: str, free_port) -> None:
    app = RetrievalApp(settings_for(tmp_path, f"http://127.0.0.1:{free_port()}"))  # nothing listens there
    port = await app.start()
    target = f"127.0.0.1:{port}"
    try:
        ids = await index_through_grpc(target, tei_url)
        async with open_channel(target) as channel:
            stub = retrieval_pb2_grpc.RetrievalStub(channel)
            reply = await unary(stub.Search, retrieval_pb2.SearchRequest(
                query="restore a snapshot", top_k=2, readable_corpora=[CORPUS]), timeout=10, peer="retrieval")
        assert reply.query_mode == "sparse"
        assert list(reply.degraded) == ["embedding"]
        assert reply.results[0].chunk.chunk_id == ids["docs/ops/restore.md"]
        assert "sparse" in reply.results[0].scores and "dense" not in reply.results[0].scores
    finally:
        await app.stop()


async def test_alias_swap_through_vectorstore_serves_the_new_version_at_once(retrieval, tei_url: str) -> None:
    target, _ = retrieval
    await index_through_grpc(target, tei_url, "v1")
    async with open_channel(target) as channel:
        stub = retrieval_pb2_grpc.RetrievalStub(channel)
        request = retrieval_pb2.SearchRequest(query="backups", top_k=1, readable_corpora=[CORPUS])
        first = await unary(stub.Search, request, timeout=10, peer="retrieval")
        await index_through_grpc(target, tei_url, "v2")  # catalog TTL is 60 s: the swap must invalidate it
        second = await unary(stub.Search, request, timeout=10, peer="retrieval")
    assert list(first.index_versions) == ["v1"]
    assert list(second.index_versions) == ["v2"]
