"""Every request ragmesh's own clients send (libs/ragmesh_common/clients: TeiClient for retrieval,
rerank and the indexer; ChatClient for generation and the condenser) is valid for what production
runs: TEI's OpenAPI document and vLLM's OpenAI protocol. The clients talk to the CPU runtime here,
through its ASGI app, so each request is also shown to be one the runtime answers.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import jsonschema
import pytest
from tei_spec import document, request_schema, validate_against

from ragmesh_common.clients.llm import ChatClient
from ragmesh_common.clients.tei import TeiClient
from ragmesh_runtime.app import create_app
from ragmesh_runtime.settings import RuntimeSettings

VLLM = Path(__file__).resolve().parents[2] / "conformance" / "vllm"
EVIDENCE_PROMPT = [
    {"role": "system", "content": "Answer only from the sources; cite them as [S1]."},
    {"role": "user", "content": "Sources:\n[S1] The indexer owns index builds.\n\nQuestion: What does the indexer own?"},
]


def vllm_schema(name: str) -> dict:
    return json.loads((VLLM / name).read_text(encoding="utf-8"))


@pytest.fixture
def recorded(runtime_models):
    """An httpx client into the runtime app that keeps every request it sends."""
    app = create_app(RuntimeSettings(), runtime_models)
    requests: list[httpx.Request] = []

    async def keep(request: httpx.Request) -> None:
        requests.append(request)

    def make(base_url: str) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=base_url, transport=httpx.ASGITransport(app=app),
                                 event_hooks={"request": [keep]}, timeout=60)

    return make, requests


async def test_tei_client_requests_are_valid_tei_requests(recorded) -> None:
    make, requests = recorded
    client = TeiClient("http://runtime", client=make("http://runtime"))
    await client.embed(["The indexer owns index builds.", "Bread is baked."])
    await client.rerank("who owns builds?", ["The indexer owns index builds.", "Bread is baked."])
    await client.info(refresh=True)
    assert await client.health()
    await client.close()

    spec_paths = document()["paths"]
    sent = [(r.method, r.url.path) for r in requests]
    assert sent == [("POST", "/embed"), ("POST", "/rerank"), ("GET", "/info"), ("GET", "/health")]
    for request in requests:
        assert request.method.lower() in spec_paths[request.url.path], (request.method, request.url.path)
        if request.method == "POST":
            assert request.headers["content-type"] == "application/json"
            validate_against(request_schema(request.url.path), json.loads(request.content))


async def test_chat_client_requests_are_valid_vllm_requests(recorded) -> None:
    make, requests = recorded
    client = ChatClient("http://runtime/v1", "", http_client=make("http://runtime"))
    pieces = [delta.text async for delta in client.stream_chat(EVIDENCE_PROMPT, max_tokens=64)]
    await client.close()

    assert "".join(pieces).strip()
    assert [(r.method, r.url.path) for r in requests] == [("GET", "/v1/models"), ("POST", "/v1/chat/completions")]
    jsonschema.validate(json.loads(requests[1].content), vllm_schema("chat_completion_request.schema.json"))


async def test_the_runtime_answers_v1_models_as_vllm_does(recorded) -> None:
    make, _ = recorded
    async with make("http://runtime") as http:
        listing = (await http.get("/v1/models")).json()
    jsonschema.validate(listing, vllm_schema("models_response.schema.json"))


def test_the_vllm_schema_refuses_what_vllm_would_drop() -> None:
    """The check above can fail: a field vLLM does not declare is refused."""
    schema = vllm_schema("chat_completion_request.schema.json")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"messages": [{"role": "user", "content": "q"}], "ragmesh_sources": []}, schema)
    with pytest.raises(jsonschema.ValidationError):
        validate_against("EmbedRequest", {"inputs": 3})
