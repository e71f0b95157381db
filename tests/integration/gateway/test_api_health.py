"""Health and metrics against real gRPC health services of the doubles."""

from __future__ import annotations

from litestar.testing import AsyncTestClient

from ragmesh.v1 import retrieval_pb2

from gateway_mesh import Mesh


async def test_live_needs_no_downstream(client: AsyncTestClient, mesh: Mesh) -> None:
    for name in ("retrieval", "rerank", "generation"):
        await mesh.stop(name)
    response = await client.get("/health/live")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


async def test_ready_when_all_serve_and_a_corpus_is_active(client: AsyncTestClient) -> None:
    response = await client.get("/health/ready")
    assert response.status_code == 200
    assert response.json() == {
        "status": "ready",
        "checks": {
            "retrieval": "serving",
            "rerank": "serving",
            "generation": "serving",
            "corpora": "serving",
        },
        "models": {"embedding": "serving", "rerank": "serving", "generation": "serving"},
        "degraded": [],
        "active_corpora": 1,
        "keyword_only": {},
        "reason": None,
    }


KEYWORD_ONLY_REASON = ("index built by all-MiniLM-L6-v2-onnx-int8@8199be6f699a (int8, onnx, 384-d); embedding "
                       "now served by sentence-transformers/all-MiniLM-L6-v2@1110a243fdf4 (float16); not declared "
                       "compatible (docs/runtime.md#model-identity)")


async def test_a_corpus_refused_for_its_embedder_is_named_with_the_reason(client: AsyncTestClient, mesh: Mesh) -> None:
    # Issue 15: after a profile switch retrieval searched keywords only and nothing said so.
    mesh.retrieval.corpora[0].search = "keyword_only"
    mesh.retrieval.corpora[0].keyword_only_reason = KEYWORD_ONLY_REASON
    response = await client.get("/health/ready")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded" and body["degraded"] == ["embedding_model"]
    assert body["keyword_only"] == {"docs@1": KEYWORD_ONLY_REASON}
    assert "docs@1" in body["reason"] and "not declared compatible" in body["reason"]


async def test_a_model_runtime_down_is_reported_with_what_it_degrades(client: AsyncTestClient, mesh: Mesh) -> None:
    # The services answer, but the runtime behind generation and rerank does not: every answer
    # would be the retrieval summary in fused order. Served (200), and said so.
    mesh.models_up.update(generation=False, rerank=False)
    response = await client.get("/health/ready")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "degraded"
    assert body["models"] == {"embedding": "serving", "rerank": "not_serving", "generation": "not_serving"}
    assert body["degraded"] == ["rerank", "generation"]
    assert "generation" in body["reason"] and body["checks"]["generation"] == "serving"


async def test_a_dead_service_is_not_ready_and_its_model_not_serving(client: AsyncTestClient, mesh: Mesh) -> None:
    await mesh.stop("rerank")
    body = (await client.get("/health/ready")).json()
    assert body["status"] == "not_ready" and body["models"]["rerank"] == "not_serving"


async def test_not_ready_when_a_downstream_is_down(client: AsyncTestClient, mesh: Mesh) -> None:
    await mesh.stop("generation")
    response = await client.get("/health/ready")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready" and body["checks"]["generation"] == "not_serving"
    assert body["checks"]["retrieval"] == "serving" and "generation" in body["reason"]


async def test_not_ready_without_an_active_corpus(client: AsyncTestClient, mesh: Mesh) -> None:
    mesh.retrieval.corpora = [retrieval_pb2.CorpusInfo(corpus="docs@1", state="empty")]
    response = await client.get("/health/ready")
    assert response.status_code == 503
    assert response.json()["checks"]["corpora"] == "not_serving" and response.json()["active_corpora"] == 0


async def test_metrics_count_requests_by_route_template(client: AsyncTestClient) -> None:
    await client.get("/api/rag/v1/files/docs@1/some/where.md")
    await client.post("/api/rag/v1/search", json={"query": "q"})
    text = (await client.get("/metrics")).text
    assert (
        'ragmesh_http_requests_total{method="POST",route="/api/rag/v1/search",service="gateway",status="200"}'
        in text
    )
    # Paths are reported by their template, so label values stay bounded.
    assert 'route="/api/rag/v1/files/{corpus}/{path}"' in text
    assert "some/where.md" not in text
    assert "ragmesh_http_request_duration_seconds_bucket" in text


def sample(text: str, name: str, labels: dict[str, str] | None = None) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for found in family.samples:
            if found.name == name and found.labels == (labels or {}):
                return found.value
    return None


async def test_each_scrape_reports_readiness_for_the_alert_rules(client: AsyncTestClient, mesh: Mesh) -> None:
    text = (await client.get("/metrics")).text
    checks = ("retrieval", "rerank", "generation", "corpora")
    assert [sample(text, "ragmesh_gateway_readiness_check", {"check": c}) for c in checks] == [1, 1, 1, 1]
    # Nobody asks /health/ready in between: the scrape itself runs the checks.
    await mesh.stop("generation")
    text = (await client.get("/metrics")).text
    assert [sample(text, "ragmesh_gateway_readiness_check", {"check": c}) for c in checks] == [1, 1, 0, 1]


async def test_a_model_runtime_down_leaves_every_readiness_check_serving(client: AsyncTestClient, mesh: Mesh) -> None:
    # /health/ready answers 200 "degraded" when only a model runtime is down: not a readiness alert.
    mesh.models_up.update(generation=False)
    text = (await client.get("/metrics")).text
    assert sample(text, "ragmesh_gateway_readiness_check", {"check": "generation"}) == 1
