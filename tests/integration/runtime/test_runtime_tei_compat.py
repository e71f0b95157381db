"""The runtime as a drop-in TEI: what TEI 1.9's OpenAPI document (tests/conformance/tei/) requires,
and what TEI's router does with each edge case (dimensions, empty inputs, token ids), route by route.
"""

from __future__ import annotations

import base64

import numpy as np
import openai
import pytest
from tei_spec import validate_against

FOOD = "A man is eating food."
BREAD = "A man is eating a piece of bread."


def vectors(response) -> np.ndarray:
    assert response.status_code == 200, response.text
    return np.array(response.json(), dtype=np.float64)


def test_info_has_every_field_tei_requires_and_says_what_is_not_offered(client):
    info = client.get("/info").json()
    validate_against("Info", info)
    assert info["served_model_name"] == info["model_id"]
    not_offered = info["ragmesh"]["not_offered"]
    assert set(not_offered) == {"/embed_all", "/embed_sparse", "/predict", "/similarity"}
    assert all(reason for reason in not_offered.values())


def test_dimensions_truncate_then_renormalize(client):
    full = vectors(client.post("/embed", json={"inputs": [FOOD], "normalize": False}))[0]
    cut = vectors(client.post("/embed", json={"inputs": [FOOD], "dimensions": 128}))[0]
    raw_cut = vectors(client.post("/embed", json={"inputs": [FOOD], "dimensions": 128, "normalize": False}))[0]
    assert cut.shape == (128,)
    np.testing.assert_allclose(np.linalg.norm(cut), 1.0, atol=1e-5)
    np.testing.assert_allclose(cut, full[:128] / np.linalg.norm(full[:128]), atol=1e-5)
    np.testing.assert_allclose(raw_cut, full[:128], atol=1e-5)


@pytest.mark.parametrize(("dimensions", "status"), [(0, 422), (385, 422), (-1, 422)])
def test_impossible_dimensions_are_validation_errors(client, dimensions, status):
    response = client.post("/embed", json={"inputs": FOOD, "dimensions": dimensions})
    assert response.status_code == status
    assert response.json()["error_type"] == "Validation"


@pytest.mark.parametrize("inputs", ["", [""], [FOOD, ""], []])
def test_empty_inputs_are_400_empty_as_in_tei(client, inputs):
    response = client.post("/embed", json={"inputs": inputs})
    assert response.status_code == 400, response.text
    assert response.json() == {"error": "`inputs` cannot be empty", "error_type": "Empty"}


def test_token_ids_embed_like_the_text_they_encode(client):
    ids = [token["id"] for token in client.post("/tokenize", json={"inputs": FOOD}).json()[0]]
    as_text = vectors(client.post("/embed", json={"inputs": FOOD}))
    as_ids = vectors(client.post("/embed", json={"inputs": ids}))
    batch = vectors(client.post("/embed", json={"inputs": [ids, BREAD]}))
    np.testing.assert_allclose(as_ids, as_text, atol=1e-5)
    np.testing.assert_allclose(batch[0], as_text[0], atol=1e-5)
    out_of_vocabulary = client.post("/embed", json={"inputs": [[101, 10_000_000, 102]]})
    assert out_of_vocabulary.status_code == 422
    assert out_of_vocabulary.json()["error_type"] == "Tokenizer"


def test_tokenize_returns_tei_simple_tokens(client):
    response = client.post("/tokenize", json={"inputs": ["hello world", "bread"]})
    assert response.status_code == 200, response.text
    validate_against("TokenizeResponse", response.json())
    first = response.json()[0]
    assert [t["text"] for t in first] == ["[CLS]", "hello", "world", "[SEP]"]
    assert first[0] == {"id": 101, "text": "[CLS]", "special": True, "start": None, "stop": None}
    assert first[2]["start"] == 6 and first[2]["stop"] == 11 and first[2]["special"] is False
    plain = client.post("/tokenize", json={"inputs": "hello", "add_special_tokens": False}).json()
    assert [t["text"] for t in plain[0]] == ["hello"]
    assert client.post("/tokenize", json={"inputs": ""}).status_code == 400


def test_decode_turns_ids_back_into_text(client):
    ids = [t["id"] for t in client.post("/tokenize", json={"inputs": "hello world"}).json()[0]]
    assert client.post("/decode", json={"ids": ids}).json() == ["hello world"]
    assert client.post("/decode", json={"ids": [ids, ids[1:2]]}).json() == ["hello world", "hello"]
    kept = client.post("/decode", json={"ids": ids, "skip_special_tokens": False}).json()
    assert kept == ["[CLS] hello world [SEP]"]


def test_v1_embeddings_through_the_openai_client(client):
    from httpx import Client as HttpxClient

    sdk = openai.OpenAI(base_url="http://runtime/v1", api_key="unused", max_retries=0,
                        http_client=HttpxClient(transport=client_transport(client)))
    created = sdk.embeddings.create(model="any", input=[FOOD, BREAD])
    cut = sdk.embeddings.create(model="any", input=FOOD, dimensions=64)
    packed = sdk.embeddings.create(model="any", input=[FOOD], encoding_format="base64")
    direct = vectors(client.post("/embed", json={"inputs": [FOOD, BREAD]}))
    assert [d.index for d in created.data] == [0, 1] and created.object == "list"
    np.testing.assert_allclose(np.array([d.embedding for d in created.data]), direct, atol=1e-5)
    assert created.model == client.get("/info").json()["served_model_name"]
    assert created.usage.prompt_tokens == created.usage.total_tokens > 0
    assert len(cut.data[0].embedding) == 64
    raw = client.post("/v1/embeddings", json={"input": [FOOD], "encoding_format": "base64"}).json()
    decoded = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), dtype="<f4")
    np.testing.assert_allclose(decoded, direct[0], atol=1e-6)
    assert packed.data[0].embedding is not None
    validate_against("OpenAICompatResponse", raw)


def test_v1_embeddings_errors_use_teis_openai_error_body(client):
    response = client.post("/v1/embeddings", json={"input": []})
    assert response.status_code == 400
    body = response.json()
    validate_against("OpenAICompatErrorResponse", body)
    # TEI's router serialises the field as "type"; its document names it "error_type": both are sent.
    assert body["type"] == body["error_type"] == "Empty" and body["code"] == 400


@pytest.mark.parametrize(
    ("path", "body"),
    [("/embed_sparse", {"inputs": FOOD}), ("/embed_all", {"inputs": FOOD}), ("/predict", {"inputs": FOOD}),
     ("/similarity", {"inputs": {"source_sentence": FOOD, "sentences": [BREAD]}})],
)
def test_routes_this_runtime_does_not_offer_say_so_as_tei_does(client, path, body):
    response = client.post(path, json=body)
    assert response.status_code == 424
    payload = response.json()
    validate_against("ErrorResponse", payload)
    assert payload["error_type"] == "Backend" and "not offered" in payload["error"]


def client_transport(client):
    """An httpx transport that hands requests to the Litestar test client (no socket needed)."""
    import httpx

    class Handed(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            path = request.url.raw_path.decode()
            response = client.request(request.method, path, content=request.content,
                                      headers={"content-type": "application/json"})
            return httpx.Response(response.status_code, headers=response.headers, content=response.content)

    return Handed()
