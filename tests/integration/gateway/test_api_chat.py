"""POST /chat/stream (SSE) and POST /chat against real gRPC doubles; disconnects over a real socket."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from litestar.testing import AsyncTestClient
from ragmesh_common.answer_defaults import ANSWER_SOURCES

from gateway_mesh import Mesh
from loopback_server import serve
from ragmesh_gateway.app import create_app

# The chat grounds on the shared default number of sources (the doubles hold six chunks).
DEFAULT_SOURCE_IDS = [f"S{i}" for i in range(1, ANSWER_SOURCES + 1)]

STREAM = "/api/rag/v1/chat/stream"


def parse_sse(text: str) -> list[tuple[str, dict | None, str | None]]:
    """(event, data, comment) per SSE message, in order."""
    messages = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        if not block.strip():
            continue
        event, data, comment = "message", None, None
        for line in block.split("\n"):
            if line.startswith(":"):
                comment = line[1:].strip()
            elif line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data = json.loads(line[5:].strip())
        messages.append((event, data, comment))
    return messages


def events_only(messages):
    return [(event, data) for event, data, comment in messages if comment is None]


async def test_stream_order_meta_tokens_sources_one_done(client: AsyncTestClient, mesh: Mesh) -> None:
    response = await client.post(
        STREAM, json={"question": "how do I start?"}, headers={"X-Request-ID": "chat-1"}
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache" and response.headers["x-accel-buffering"] == "no"
    events = events_only(parse_sse(response.text))
    names = [name for name, _ in events]
    assert names == ["meta", "token", "token", "sources", "done"]
    meta = events[0][1]
    assert meta["request_id"] == "chat-1" and meta["index_version"] == "v1" and meta["degraded"] == []
    assert "".join(d["text"] for n, d in events if n == "token") == "Grounded answer [S1]."
    sources = events[3][1]["sources"]
    assert [s["source_id"] for s in sources] == ["S1"] and sources[0]["trust"] == "untrusted"
    assert events[-1][1] == {
        "answer_status": "answered",
        "model": "test-llm",
        "finish_reason": "stop",
        "degraded": [],
        "hint": None,
    }
    # Generation received the top sources, the request id, and the id in its metadata.
    sent = mesh.generation.requests[-1]
    assert sent.question == "how do I start?" and sent.request_id == "chat-1"
    assert [s.source_id for s in sent.sources] == DEFAULT_SOURCE_IDS
    assert mesh.generation.metadata[-1]["x-request-id"] == "chat-1"
    # Chat asks retrieval for parent sections to ground on.
    assert mesh.retrieval.searches[-1].include_content is True


async def test_generator_error_mid_stream_ends_with_one_error_event(
    client: AsyncTestClient, mesh: Mesh
) -> None:
    mesh.generation.mode = "fail_mid"
    response = await client.post(STREAM, json={"question": "q"})
    assert response.status_code == 200
    events = events_only(parse_sse(response.text))
    # The sources event still comes before the terminal one: what the streamed text cites, or
    # (nothing cited) the retrieval results.
    assert [name for name, _ in events] == ["meta", "token", "sources", "error"]
    assert events[2][1]["basis"] == "retrieved" and len(events[2][1]["sources"]) == ANSWER_SOURCES
    error = events[-1][1]
    assert error["code"] == "RUNTIME_ERROR" and error["request_id"] == response.headers["x-request-id"]
    assert error["degraded"] == ["generation"]
    assert "Traceback" not in response.text


async def test_rerank_down_is_reported_in_meta_and_done(client: AsyncTestClient, mesh: Mesh) -> None:
    mesh.rerank.mode = "down"
    events = events_only(parse_sse((await client.post(STREAM, json={"question": "q"})).text))
    assert events[0][1]["degraded"] == ["rerank"]
    assert events[-1][0] == "done" and events[-1][1]["degraded"] == ["rerank"]


async def test_retrieval_down_before_the_stream_is_a_json_error(client: AsyncTestClient, mesh: Mesh) -> None:
    await mesh.stop("retrieval")
    response = await client.post(STREAM, json={"question": "q"})
    assert response.status_code == 503
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["code"] == "UNAVAILABLE"


async def test_bad_chat_input_is_a_400(client: AsyncTestClient) -> None:
    for body, code in [
        ({"question": ""}, "QUERY_EMPTY"),
        ({"question": "q", "extra": 1}, "UNKNOWN_FIELD"),
        ({"question": "q", "session_id": "has space"}, "INVALID_ARGUMENT"),
    ]:
        response = await client.post(STREAM, json=body)
        assert (response.status_code, response.json()["code"]) == (400, code)


async def test_answer_all_at_once(client: AsyncTestClient) -> None:
    response = await client.post("/api/rag/v1/chat", json={"question": "q", "top_k": 2})
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "done" and body["answer"] == "Grounded answer [S1]."
    assert body["answer_status"] == "answered" and body["model"] == "test-llm"
    assert [s["source_id"] for s in body["sources"]] == ["S1"] and body["error"] is None


async def test_answer_all_at_once_reports_generation_failure(client: AsyncTestClient, mesh: Mesh) -> None:
    mesh.generation.mode = "fail_mid"
    body = (await client.post("/api/rag/v1/chat", json={"question": "q"})).json()
    assert body["status"] == "error" and body["error"]["code"] == "RUNTIME_ERROR"


async def test_answer_all_at_once_with_generation_down_is_the_retrieval_summary(client: AsyncTestClient,
                                                                                mesh: Mesh) -> None:
    """docs/operations.md's degradation order; before: ``status: "error"``, ``UNAVAILABLE``."""
    await mesh.stop("generation")
    response = await client.post("/api/rag/v1/chat", json={"question": "q", "top_k": 3})
    assert response.status_code == 200
    body = response.json()
    assert (body["status"], body["answer"], body["answer_status"], body["error"]) == ("done", "", "withheld", None)
    assert (body["finish_reason"], body["degraded"]) == ("generation_unavailable", ["generation"])
    assert body["sources_basis"] == "retrieved" and [s["source_id"] for s in body["sources"]] == ["S1", "S2", "S3"]


async def test_client_disconnect_cancels_the_upstream_generation(mesh: Mesh) -> None:
    mesh.generation.mode = "hang"
    async with serve(create_app(mesh.settings())) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
            async with http.stream("POST", STREAM, json={"question": "q"}) as response:
                assert response.status_code == 200
                seen = ""
                async for chunk in response.aiter_text():
                    seen += chunk
                    if "event: token" in seen:
                        break  # leave mid-answer: closing the response drops the connection
        # The generation double sees its stream cancelled once the gateway notices the disconnect.
        assert await asyncio.to_thread(mesh.generation.cancelled.wait, 10)


async def test_heartbeat_comments_while_the_generator_is_quiet(mesh: Mesh) -> None:
    mesh.generation.mode = "slow_start"
    mesh.generation.slow_start_s = 0.5
    async with serve(create_app(mesh.settings(heartbeat_s=0.05))) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
            response = await http.post(STREAM, json={"question": "q"})
    messages = parse_sse(response.text)
    comments = [i for i, (_, _, comment) in enumerate(messages) if comment == "ping"]
    first_token = next(i for i, (event, _, c) in enumerate(messages) if event == "token" and c is None)
    assert comments and min(comments) < first_token
    assert [e for e, _ in events_only(messages)] == ["meta", "token", "token", "sources", "done"]


@pytest.mark.parametrize("mode", ["answer", "fail_mid"])
async def test_exactly_one_terminal_event_over_a_real_socket(mesh: Mesh, mode: str) -> None:
    mesh.generation.mode = mode
    async with serve(create_app(mesh.settings())) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
            response = await http.post(STREAM, json={"question": "q"})
    names = [e for e, _ in events_only(parse_sse(response.text))]
    assert names[0] == "meta" and sum(n in ("done", "error") for n in names) == 1
    assert names[-1] in ("done", "error")


async def test_the_question_is_query_as_in_search_and_question_is_its_alias(client: AsyncTestClient) -> None:
    by_query = await client.post("/api/rag/v1/chat", json={"query": "q"})
    by_alias = await client.post("/api/rag/v1/chat", json={"question": "q"})
    both = await client.post(STREAM, json={"query": "q", "question": "q"})
    neither = await client.post("/api/rag/v1/chat", json={"top_k": 2})
    assert by_query.status_code == by_alias.status_code == 200
    assert by_query.json()["answer"] == by_alias.json()["answer"] == "Grounded answer [S1]."
    assert (both.status_code, both.json()["code"]) == (400, "INVALID_ARGUMENT")
    assert "`query`" in both.json()["message"] and "`question`" in both.json()["message"]
    assert (neither.status_code, neither.json()["code"]) == (400, "MALFORMED_BODY")


async def test_citation_urls_are_absolute_on_the_request_origin(mesh: Mesh) -> None:
    for chunk in mesh.retrieval.chunks:  # indexed without a url base: the gateway's source view
        chunk.url = chunk.source_path.removesuffix(".md")
    async with serve(create_app(mesh.settings())) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
            search = (await http.post("/api/rag/v1/search", json={"query": "q", "top_k": 1})).json()
            answer = (await http.post("/api/rag/v1/chat", json={"query": "q"})).json()
            streamed = parse_sse((await http.post(STREAM, json={"query": "q"})).text)
            read = (await http.post("/api/rag/v1/chunks/batch-get", json={"chunk_ids": [
                search["results"][0]["chunk_id"]]})).json()
    view = f"{base_url}/api/rag/v1/source/docs@1/guide/page6.md?lines=6-9#L6"
    (sources,) = [data for event, data, _ in streamed if event == "sources"]
    assert search["results"][0]["url"] == answer["sources"][0]["url"] == sources["sources"][0]["url"] == view
    assert read["chunks"][0]["url"] == view
    # The download path stays a path of this gateway, as its name says.
    assert answer["sources"][0]["download_path"] == "/api/rag/v1/files/docs@1/guide/page6.md"
