"""The chat SSE contract over real gRPC and real Redis: one sources event and exactly one terminal
event on success, generator failure, timeout, garbage and disconnect; refusal; session memory."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from litestar.testing import AsyncTestClient
from ragmesh.v1 import generation_pb2, generation_pb2_grpc

from ragmesh_common.answer_defaults import ANSWER_SOURCES
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.rpc.server import GrpcServer

from gateway_mesh import Mesh
from loopback_server import serve
from ragmesh_gateway.app import create_app
from test_api_chat import events_only, parse_sse

STREAM = "/api/rag/v1/chat/stream"


def token(text: str) -> generation_pb2.GenerateEvent:
    return generation_pb2.GenerateEvent(token=generation_pb2.TokenDelta(text=text))


def done(**fields) -> generation_pb2.GenerateEvent:
    return generation_pb2.GenerateEvent(done=generation_pb2.Terminal(**fields))


class ScriptedGeneration(generation_pb2_grpc.GenerationServicer):
    """Plays ``script``: events are sent, floats are sleeps, exceptions are raised. ``cite`` sends
    the request's first source as the cited one."""

    CITE = object()

    def __init__(self) -> None:
        self.script: list = []
        self.requests: list[generation_pb2.GenerateRequest] = []
        self.cancelled = threading.Event()

    async def Generate(self, request, context):
        self.requests.append(request)
        try:
            for step in self.script:
                if step is self.CITE:
                    yield generation_pb2.GenerateEvent(
                        sources=generation_pb2.SourceList(sources=[request.sources[0]]))
                elif isinstance(step, float):
                    await asyncio.sleep(step)
                elif isinstance(step, Exception):
                    raise step
                else:
                    yield step
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


def answered(text: str = "Grounded answer [S1].") -> list:
    return [token(text), ScriptedGeneration.CITE,
            done(answer_status="answered", model="scripted", finish_reason="stop", answer=text)]


@pytest.fixture
def generation(mesh: Mesh) -> Iterator[tuple[ScriptedGeneration, str]]:
    double = ScriptedGeneration()

    async def start() -> GrpcServer:
        # Built on the doubles' loop: a grpc.aio server belongs to the loop it was created on.
        server = GrpcServer("test-scripted-generation", host="127.0.0.1", port=0, metrics_port=None)
        server.add(generation_pb2_grpc.add_GenerationServicer_to_server, double, "ragmesh.v1.Generation")
        await server.start()
        return server

    server = mesh.run(start())
    try:
        yield double, f"127.0.0.1:{server.port}"
    finally:
        mesh.run(server.server.stop(None))


@pytest.fixture
def settings_for(mesh: Mesh, generation, redis_url: str):
    prefix = f"ragmesh-test:{uuid.uuid4().hex[:12]}:session"

    def make(**overrides):
        values = dict(generation_addr=generation[1], redis_url=redis_url, session_prefix=prefix)
        values.update(overrides)
        return mesh.settings(**values)

    return make


@pytest.fixture
async def client(settings_for) -> AsyncIterator[AsyncTestClient]:
    async with AsyncTestClient(create_app(settings_for())) as test_client:
        yield test_client


async def stream(client: AsyncTestClient, body: dict) -> list[tuple[str, dict]]:
    response = await client.post(STREAM, json=body)
    assert response.status_code == 200, response.text
    return events_only(parse_sse(response.text))


def assert_contract(events: list[tuple[str, dict]]) -> None:
    """meta, token*, exactly one sources, exactly one terminal (done or error), last."""
    names = [name for name, _ in events]
    assert names[0] == "meta", names
    assert sum(n in ("done", "error") for n in names) == 1 and names[-1] in ("done", "error"), names
    assert names.count("sources") == 1 and names[-2] == "sources", names
    assert set(names[1:-2]) <= {"token"}, names


async def test_success_order_and_a_server_issued_session(client, generation) -> None:
    double, _ = generation
    double.script = answered()
    events = await stream(client, {"question": "how do I start?"})
    assert_contract(events)
    meta, sources, end = events[0][1], events[-2][1], events[-1][1]
    assert meta["session_id"].startswith("rms_") and len(meta["session_id"]) >= 26
    assert meta["condensed_question"] is None
    assert sources["basis"] == "cited" and [s["source_id"] for s in sources["sources"]] == ["S1"]
    assert end["answer_status"] == "answered" and end["degraded"] == []


async def test_follow_up_uses_the_remembered_turns(client, generation) -> None:
    double, _ = generation
    double.script = answered("The default queue depth is forty-two [S1].")
    first = await stream(client, {"question": "What is the default queue depth of the scheduler?"})
    session_id = first[0][1]["session_id"]
    follow = await stream(client, {"question": "And how do I change it?", "session_id": session_id})
    assert_contract(follow)
    meta = follow[0][1]
    assert meta["session_id"] == session_id
    assert meta["condensed_question"].endswith("And how do I change it?")
    assert "queue" in meta["condensed_question"] and "scheduler" in meta["condensed_question"]
    sent = double.requests[-1]
    assert sent.question == meta["condensed_question"]
    assert [(t.role, t.content) for t in sent.history] == [
        ("user", "What is the default queue depth of the scheduler?"),
        ("assistant", "The default queue depth is forty-two."),
    ]


async def test_unknown_or_malformed_session_ids_are_json_errors(client, generation) -> None:
    double, _ = generation
    double.script = answered()
    unknown = await client.post(STREAM, json={"question": "q", "session_id": "rms_" + "x" * 32})
    assert unknown.status_code == 404 and unknown.json()["code"] == "NOT_FOUND"
    assert unknown.headers["content-type"].startswith("application/json")
    malformed = await client.post(STREAM, json={"question": "q", "session_id": "../../etc"})
    assert malformed.status_code == 400 and malformed.json()["code"] == "INVALID_ARGUMENT"
    assert double.requests == []


async def test_overlong_history_is_capped(settings_for, generation) -> None:
    double, _ = generation
    double.script = answered()
    async with AsyncTestClient(create_app(settings_for(session_max_turns=4))) as client:
        session_id = (await stream(client, {"question": "first question about queues"}))[0][1]["session_id"]
        for i in range(6):
            await stream(client, {"question": f"question number {i} about workers", "session_id": session_id})
    assert len(double.requests[-1].history) == 4
    assert double.requests[-1].history[-2].content == "question number 4 about workers"


@pytest.mark.parametrize("script, reason", [
    ([RagmeshError(ErrorCode.UNAVAILABLE, "runtime unreachable")], "generation_unavailable"),
    ([done(answer_status="withheld", error_code="RUNTIME_ERROR",
           error_message="generation runtime sent a malformed stream")], "generation_runtime_error"),
])
async def test_generator_failure_before_tokens_gives_the_retrieval_summary(client, generation, script,
                                                                          reason) -> None:
    """The degradation order of docs/operations.md: the retrieval summary instead of an answer, a
    ``done`` that says so (before: ``event: error``)."""
    double, _ = generation
    double.script = script
    events = await stream(client, {"question": "q"})
    assert_contract(events)
    assert [n for n, _ in events] == ["meta", "sources", "done"]
    assert events[1][1]["basis"] == "retrieved" and len(events[1][1]["sources"]) == ANSWER_SOURCES
    end = events[-1][1]
    assert (end["answer_status"], end["finish_reason"], end["degraded"]) == ("withheld", reason, ["generation"])


async def test_withheld_answer_is_done_with_the_retrieval_summary(client, generation) -> None:
    double, _ = generation
    double.script = [generation_pb2.GenerateEvent(sources=generation_pb2.SourceList()),
                     done(answer_status="withheld", model="scripted", finish_reason="verification_failed",
                          degraded=["generation"])]
    events = await stream(client, {"question": "q"})
    assert [n for n, _ in events] == ["meta", "sources", "done"]
    assert events[1][1]["basis"] == "retrieved" and len(events[1][1]["sources"]) == ANSWER_SOURCES
    assert events[-1][1]["answer_status"] == "withheld" and events[-1][1]["degraded"] == ["generation"]
    metrics = (await client.get("/metrics")).text
    assert 'ragmesh_degraded_total{component="generation",service="gateway"}' in metrics


async def test_timeout_ends_with_one_deadline_error(settings_for, generation) -> None:
    double, _ = generation
    double.script = [token("Slow [S1]. "), 30.0, *answered()]
    async with AsyncTestClient(create_app(settings_for(generation_timeout_s=0.5, heartbeat_s=0.1))) as client:
        response = await client.post(STREAM, json={"question": "q"})
    messages = parse_sse(response.text)
    events = events_only(messages)
    assert_contract(events)
    assert events[-1][0] == "error" and events[-1][1]["code"] == "DEADLINE_EXCEEDED"
    assert [s["source_id"] for s in events[-2][1]["sources"]] == ["S1"]  # what the sent text cites
    assert any(comment == "ping" for _, _, comment in messages)


@pytest.mark.parametrize("script, code", [
    ([token("half an answer")], "UNAVAILABLE"),  # the stream just ends: no terminal upstream
    ([done(answer_status="withheld", error_code="NOT_A_CODE", error_message="?")], "INTERNAL"),
    ([token("half an answer"), done(answer_status="withheld", error_code="RUNTIME_ERROR",
                                    error_message="generation runtime sent a malformed stream")], "RUNTIME_ERROR"),
])
async def test_garbage_from_the_generator_is_one_clean_error(client, generation, script, code) -> None:
    double, _ = generation
    double.script = script
    events = await stream(client, {"question": "q"})
    assert_contract(events)
    assert events[-1][0] == "error" and events[-1][1]["code"] == code


async def test_invented_citations_are_not_shown(client, generation) -> None:
    double, _ = generation
    bogus = generation_pb2.Source(source_id="S9")
    invented = generation_pb2.GenerateEvent(sources=generation_pb2.SourceList(sources=[bogus]))
    double.script = [token("x [S1]."), invented, done(answer_status="answered", answer="x [S1].")]
    events = await stream(client, {"question": "q"})
    assert events[-2][1]["sources"] == []


async def test_nothing_retrieved_is_refused_without_calling_generation(client, mesh: Mesh,
                                                                      generation) -> None:
    double, _ = generation
    double.script = answered()
    mesh.retrieval.chunks = []
    events = await stream(client, {"question": "What is the boiling point of tungsten?"})
    assert [n for n, _ in events] == ["meta", "token", "sources", "done"]
    assert events[1][1]["text"] == "I can't answer that from the indexed documents."
    assert events[2][1]["sources"] == []
    end = events[-1][1]
    assert (end["answer_status"], end["finish_reason"]) == ("insufficient_evidence", "no_sources")
    assert double.requests == []


@pytest.mark.parametrize("body, status, code", [
    ({"question": ""}, 400, "QUERY_EMPTY"),
    ({"question": "   "}, 400, "QUERY_EMPTY"),
    ({"question": "x" * 2001}, 400, "QUERY_TOO_LONG"),
    ({"question": "q" * 70_000}, 413, "BODY_TOO_LARGE"),
    ({"question": "q", "max_tokens": 0}, 400, "INVALID_ARGUMENT"),
])
async def test_bad_input_is_refused_before_any_stream(client, generation, body, status, code) -> None:
    response = await client.post(STREAM, json=body)
    assert (response.status_code, response.json()["code"]) == (status, code)
    assert generation[0].requests == []


async def test_client_disconnect_cancels_the_generation_call(settings_for, generation) -> None:
    double, _ = generation
    double.script = [token("First [S1]. "), 3600.0, *answered()]
    async with serve(create_app(settings_for())) as base_url:
        async with httpx.AsyncClient(base_url=base_url, timeout=10) as http:
            async with http.stream("POST", STREAM, json={"question": "q"}) as response:
                seen = ""
                async for chunk in response.aiter_text():
                    seen += chunk
                    if "event: token" in seen:
                        break
        assert await asyncio.to_thread(double.cancelled.wait, 10)
