"""POST /search and friends against real gRPC retrieval and rerank doubles."""

from __future__ import annotations

from litestar.testing import AsyncTestClient
from prometheus_client import REGISTRY

from gateway_mesh import CORPUS, Mesh, chunk_id

SEARCH = "/api/rag/v1/search"


def degraded_count() -> float:
    return (
        REGISTRY.get_sample_value("ragmesh_degraded_total", {"service": "gateway", "component": "rerank"})
        or 0.0
    )


async def test_search_reranks_and_returns_citable_results(client: AsyncTestClient, mesh: Mesh) -> None:
    response = await client.post(SEARCH, json={"query": "how do I start?", "top_k": 3})
    assert response.status_code == 200
    body = response.json()
    assert body["request_id"] == response.headers["x-request-id"]
    assert body["degraded"] == [] and body["query_mode"] == "hybrid"
    assert body["index_version"] == "v1" and body["index_versions"] == ["v1"]
    # The reranking double reverses the fused order.
    assert [r["chunk_id"] for r in body["results"]] == [chunk_id(6), chunk_id(5), chunk_id(4)]
    first = body["results"][0]
    assert first["source_id"] == "S1" and first["trust"] == "untrusted"
    assert first["source_lines"] == [6, 9] and first["page"] is None
    assert first["url"] == "https://docs.example/page6" and first["quote"] == "quote number 6"
    assert set(first["scores"]) == {"dense", "sparse", "fused", "rerank"} and first["scores"]["rerank"] > 0
    assert body["security"]["trust"] == "untrusted" and body["security"]["findings_count"] == 0
    # Retrieval got the candidate pool, and no content since it was not asked for.
    sent = mesh.retrieval.searches[-1]
    assert sent.top_k == 50 and sent.include_content is False and sent.query == "how do I start?"


async def test_request_id_and_filters_travel_to_retrieval(client: AsyncTestClient, mesh: Mesh) -> None:
    response = await client.post(
        SEARCH,
        json={"query": "q", "filters": {"corpus": CORPUS, "tags": ["api"], "path_prefix": "guide/"}},
        headers={"X-Request-ID": "trace-me-123"},
    )
    assert response.status_code == 200
    assert response.headers["x-request-id"] == "trace-me-123"
    assert mesh.retrieval.metadata[-1]["x-request-id"] == "trace-me-123"
    sent = mesh.retrieval.searches[-1].filters
    assert list(sent.corpora) == [CORPUS] and list(sent.tags) == ["api"] and sent.path_prefix == "guide/"


async def test_malformed_request_id_is_replaced(client: AsyncTestClient) -> None:
    response = await client.post(SEARCH, json={"query": "q"}, headers={"X-Request-ID": "bad id\twith spaces"})
    assert response.status_code == 200
    assert response.headers["x-request-id"] != "bad id\twith spaces"
    assert response.json()["request_id"] == response.headers["x-request-id"]


async def test_rerank_down_serves_fused_order_marked_degraded(client: AsyncTestClient, mesh: Mesh) -> None:
    mesh.rerank.mode = "down"
    before = degraded_count()
    response = await client.post(SEARCH, json={"query": "q", "top_k": 2})
    assert response.status_code == 200
    body = response.json()
    assert body["degraded"] == ["rerank"]
    assert [r["chunk_id"] for r in body["results"]] == [chunk_id(1), chunk_id(2)]
    assert all(r["scores"]["rerank"] is None for r in body["results"])
    assert degraded_count() == before + 1


async def test_rerank_past_its_deadline_is_degraded_not_an_error(mesh: Mesh) -> None:
    from ragmesh_gateway.app import create_app

    mesh.rerank.mode = "slow"
    async with AsyncTestClient(create_app(mesh.settings(rerank_timeout_s=0.2))) as slow_client:
        response = await slow_client.post(SEARCH, json={"query": "q", "top_k": 2})
    assert response.status_code == 200
    assert response.json()["degraded"] == ["rerank"]


async def test_rerank_server_gone_is_degraded(client: AsyncTestClient, mesh: Mesh) -> None:
    await mesh.stop("rerank")
    response = await client.post(SEARCH, json={"query": "q", "top_k": 2})
    assert response.status_code == 200 and response.json()["degraded"] == ["rerank"]


async def test_retrieval_down_is_a_503_with_a_stable_code(client: AsyncTestClient, mesh: Mesh) -> None:
    await mesh.stop("retrieval")
    response = await client.post(SEARCH, json={"query": "q"})
    assert response.status_code == 503
    body = response.json()
    assert body["code"] == "UNAVAILABLE" and body["request_id"] == response.headers["x-request-id"]


async def test_batch_get_reads_pinned_chunks(client: AsyncTestClient) -> None:
    ids = [chunk_id(2), chunk_id(99)]
    response = await client.post(
        "/api/rag/v1/chunks/batch-get",
        json={"chunk_ids": ids, "index_version": "v1", "include_content": True},
    )
    assert response.status_code == 200
    body = response.json()
    assert [c["chunk_id"] for c in body["chunks"]] == [chunk_id(2)]
    assert body["missing"] == [chunk_id(99)] and body["index_version"] == "v1"


async def test_batch_get_refuses_malformed_ids(client: AsyncTestClient) -> None:
    response = await client.post("/api/rag/v1/chunks/batch-get", json={"chunk_ids": ["../../etc"]})
    assert response.status_code == 400 and response.json()["code"] == "MALFORMED_CHUNK_ID"


async def test_corpora_and_stats(client: AsyncTestClient) -> None:
    corpora = (await client.get("/api/rag/v1/corpora")).json()
    assert [c["corpus"] for c in corpora["corpora"]] == [CORPUS]
    assert corpora["corpora"][0]["active_index_version"] == "v1"
    stats = (await client.get("/api/rag/v1/stats")).json()
    assert stats["points"] == 6 and stats["store"] == "qdrant-local"


async def test_a_pinned_version_is_gone_when_no_corpus_is_served_any_more(mesh: Mesh) -> None:
    # The last corpus was removed (`ragmesh corpus remove`): the caller reads nothing, so retrieval is
    # not asked, and a pinned version still answers 410 INDEX_VERSION_GONE as it does with corpora left.
    from ragmesh_gateway.app import create_app

    mesh.retrieval.corpora = []
    async with AsyncTestClient(create_app(mesh.settings(corpora=[]))) as client:
        pinned = await client.post("/api/rag/v1/chunks/batch-get",
                                   json={"chunk_ids": [chunk_id(1)], "index_version": "v1"})
        unpinned = await client.post("/api/rag/v1/chunks/batch-get", json={"chunk_ids": [chunk_id(1)]})
    assert pinned.status_code == 410 and pinned.json()["code"] == "INDEX_VERSION_GONE", pinned.text
    assert pinned.json()["details"] == {"index_version": "v1"}
    assert unpinned.status_code == 200 and unpinned.json()["missing"] == [chunk_id(1)]
