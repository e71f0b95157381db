"""One chat request, traced over real OTLP/gRPC: one trace from the gateway to the model runtime.

The observed mesh (tests/e2e/conftest.py) exports spans with the SDK's OTLP exporter to a receiver in
this process, as it would to the OpenTelemetry Collector. Its configuration is the Compose one
(token auth in PostgreSQL, rate limits in Redis), so the request touches every kind of dependency.
Spans are checked against OpenTelemetry's semantic conventions: HTTP server, RPC (gRPC), database
(Qdrant, Redis, PostgreSQL) and GenAI (embeddings, chat). The instrumentations this package pins
emit the pre-1.26 names (``http.method``, ``db.system``); either generation is accepted.
"""

from __future__ import annotations

import re
import time

import pytest

from ragmesh_cli.gateway_client import stream_answer

pytestmark = pytest.mark.e2e

QUESTION = "How often do Quokka workers report heartbeats?"
SERVICES = {"ragmesh-gateway", "ragmesh-retrieval", "ragmesh-rerank", "ragmesh-generation", "ragmesh-runtime"}


def attribute(span, *names: str):
    """The first of several attribute names (old and new semantic conventions) that is set."""
    return next((span.attributes[name] for name in names if name in span.attributes), None)


class Trace:
    def __init__(self, spans) -> None:
        self.spans = spans
        self.by_id = {span.span_id: span for span in spans}

    def parent(self, span):
        return self.by_id.get(span.parent_id) if span.parent_id else None

    def ancestors(self, span):
        found = []
        while (span := self.parent(span)) is not None:
            found.append(span)
        return found

    def children(self, span):
        return [other for other in self.spans if other.parent_id == span.span_id]

    def descendants(self, span):
        found, todo = [], [span]
        while todo:
            for child in self.children(todo.pop()):
                found.append(child)
                todo.append(child)
        return found

    def one(self, predicate, what: str):
        matches = [span for span in self.spans if predicate(span)]
        assert len(matches) == 1, f"{what}: {len(matches)} spans, expected 1: {[s.name for s in matches]}"
        return matches[0]

    def orphans(self):
        return [span for span in self.spans if span.parent_id and span.parent_id not in self.by_id]


def rpc_pair(trace: Trace, service: str, method: str):
    """The gateway's gRPC client span for ``service/method`` and the server span it caused."""

    def is_call(kind, owner):
        return lambda s: (s.kind == kind and s.service == owner and s.attributes.get("rpc.system") == "grpc"
                          and s.attributes.get("rpc.service") == f"ragmesh.v1.{service}"
                          and s.attributes.get("rpc.method") == method)

    client = trace.one(is_call("CLIENT", "ragmesh-gateway"), f"gateway -> {service}/{method}")
    server = trace.one(is_call("SERVER", f"ragmesh-{service.lower()}"), f"{service}/{method} server")
    assert server.parent_id == client.span_id, f"{service}/{method}: the server span does not continue the call"
    assert client.attributes.get("rpc.grpc.status_code") == 0 == server.attributes.get("rpc.grpc.status_code")
    return client, server


def runtime_call(trace: Trace, stage, path: str):
    """The HTTP client span under ``stage`` that reached the runtime at ``path``, and the runtime's span."""
    clients = [s for s in trace.descendants(stage) if s.kind == "CLIENT"
               and str(attribute(s, "url.full", "http.url")).endswith(path)]
    assert clients, f"no HTTP client span for {path} under {stage.name}"
    client = clients[-1]
    assert attribute(client, "http.request.method", "http.method") in ("GET", "POST")
    assert attribute(client, "http.response.status_code", "http.status_code") == 200
    (server,) = [s for s in trace.children(client) if s.service == "ragmesh-runtime" and s.kind == "SERVER"]
    assert attribute(server, "http.route", "http.target") == path
    return client, server


@pytest.fixture(scope="module")
def chat_trace(observed_mesh) -> Trace:
    request_id = f"otlp-{time.time_ns()}"
    result = stream_answer(observed_mesh.gateway_url, QUESTION,
                           headers={"X-Request-ID": request_id, **observed_mesh.headers}, timeout=120)
    assert result["terminal"] and result["terminal"]["event"] == "done", result["terminal"]

    def complete(spans) -> bool:
        roots = [s for s in spans if s.attributes.get("ragmesh.request_id") == request_id]
        if not roots:
            return False
        trace = Trace([s for s in spans if s.trace_id == roots[0].trace_id])
        # Every service reported, and every span's parent arrived (exports are batched per process).
        return SERVICES <= {s.service for s in trace.spans} and not trace.orphans() and any(
            s.service == "ragmesh-runtime" and "chat/completions" in s.name for s in trace.spans)

    spans = observed_mesh.collector.receiver.wait_for(complete, timeout=30)
    roots = [s for s in spans if s.attributes.get("ragmesh.request_id") == request_id]
    assert len(roots) == 1, f"gateway server spans carrying the request id: {len(roots)}"
    return Trace([s for s in spans if s.trace_id == roots[0].trace_id])


def test_one_trace_spans_every_service_as_one_tree(chat_trace: Trace) -> None:
    assert SERVICES <= {span.service for span in chat_trace.spans}
    assert not chat_trace.orphans(), [(s.service, s.name) for s in chat_trace.orphans()]
    (root,) = [span for span in chat_trace.spans if span.parent_id is None]
    assert root.service == "ragmesh-gateway" and root.kind == "SERVER"


def test_the_gateway_request_is_an_http_server_span(chat_trace: Trace) -> None:
    (root,) = [span for span in chat_trace.spans if span.parent_id is None]
    assert attribute(root, "http.request.method", "http.method") == "POST"
    assert root.attributes.get("http.route") == "/api/rag/v1/chat/stream"
    assert attribute(root, "http.response.status_code", "http.status_code") == 200


def test_each_hop_between_services_is_a_grpc_client_and_server_span(chat_trace: Trace) -> None:
    rpc_pair(chat_trace, "Retrieval", "Search")
    rpc_pair(chat_trace, "Rerank", "Rerank")
    rpc_pair(chat_trace, "Generation", "Generate")


def test_retrieval_embeds_the_query_and_queries_qdrant(chat_trace: Trace) -> None:
    _, search = rpc_pair(chat_trace, "Retrieval", "Search")
    embedding = chat_trace.one(lambda s: s.attributes.get("gen_ai.operation.name") == "embeddings",
                               "embeddings span")
    assert embedding.service == "ragmesh-retrieval" and embedding.kind == "CLIENT"
    assert search in chat_trace.ancestors(embedding)
    assert embedding.attributes.get("gen_ai.request.model")
    runtime_call(chat_trace, embedding, "/embed")

    queries = [s for s in chat_trace.descendants(search) if attribute(s, "db.system.name", "db.system") == "qdrant"]
    assert queries, "no Qdrant span under the retrieval call"
    for query in queries:
        assert query.kind == "CLIENT"
        assert query.attributes.get("db.operation.name") == "query_points"
        assert str(query.attributes.get("db.collection.name", "")).startswith("rm__")


def test_rerank_calls_the_model_runtime(chat_trace: Trace) -> None:
    _, server = rpc_pair(chat_trace, "Rerank", "Rerank")
    (stage,) = [s for s in chat_trace.children(server) if s.name == "rerank"]
    assert stage.attributes.get("ragmesh.rerank.model")
    runtime_call(chat_trace, stage, "/rerank")


def test_the_llm_call_is_a_gen_ai_chat_span(chat_trace: Trace) -> None:
    _, server = rpc_pair(chat_trace, "Generation", "Generate")
    chats = [s for s in chat_trace.descendants(server) if s.attributes.get("gen_ai.operation.name") == "chat"]
    assert chats, "no gen_ai chat span under the generation call"
    chat = chats[0]
    assert chat.kind == "CLIENT"
    model = chat.attributes.get("gen_ai.request.model")
    assert model and chat.name == f"chat {model}"  # "{operation} {model}", as the conventions name it
    assert attribute(chat, "gen_ai.provider.name", "gen_ai.system")
    assert chat.attributes.get("gen_ai.response.finish_reasons")
    runtime_call(chat_trace, chat, "/v1/chat/completions")


def test_redis_and_postgresql_calls_are_database_client_spans(chat_trace: Trace) -> None:
    (root,) = [span for span in chat_trace.spans if span.parent_id is None]
    below_gateway = chat_trace.descendants(root)
    redis = [s for s in below_gateway if attribute(s, "db.system.name", "db.system") == "redis"]
    postgres = [s for s in below_gateway if attribute(s, "db.system.name", "db.system") == "postgresql"]
    assert redis, "the rate limiter's Redis calls are not traced"
    assert postgres, "the token lookup in PostgreSQL is not traced"
    for span in redis + postgres:
        assert span.kind == "CLIENT" and span.service == "ragmesh-gateway"
    # Statements without their values: "EVALSHA ? ?", SQL with $1 placeholders.
    for span in redis:
        assert re.fullmatch(r"[A-Z]+(?: [A-Z]+)?(?: \?)*", attribute(span, "db.query.text", "db.statement")), span
    assert any("api_tokens" in str(attribute(s, "db.query.text", "db.statement")) for s in postgres)


def test_no_span_carries_the_question_or_the_token(chat_trace: Trace, observed_mesh) -> None:
    # rmk_<16 hex>_<43 characters of base64url>: the secret may hold "_" itself, so split after the
    # id (a last "_" piece as short as "0" was once taken for the secret, and found in a URL).
    secret = observed_mesh.token.split("_", 2)[2]
    assert len(secret) == 43, observed_mesh.token
    for span in chat_trace.spans:
        for key, value in span.attributes.items():
            text = str(value)
            assert QUESTION not in text and "heartbeats" not in text, f"{span.service} {span.name} {key}"
            assert secret not in text, f"{span.service} {span.name} {key} holds the token"
