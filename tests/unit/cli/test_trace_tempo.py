"""`ragmesh trace` reading from Tempo's HTTP API (RAGMESH_TEMPO_URL or --tempo-url).

The Tempo here is a small HTTP server in this process answering the two documented endpoints the
command uses: ``GET /api/search`` (TraceQL ``q``, with ``start``/``end`` so that blocks already flushed
to the backend are searched too) and ``GET /api/traces/<trace id>``. Its trace bodies are what the
OpenTelemetry SDK's own OTLP encoder makes of real spans, in protobuf's JSON mapping as Tempo sends
it: ids in base64, 64-bit integers as strings, enums by name, and search results' trace ids without
their leading zeros.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import SpanKind, Status, StatusCode

from ragmesh_cli.main import main


class FixedTraceIds(IdGenerator):
    def __init__(self, trace_id: int) -> None:
        self.trace_id, self.next_span = trace_id, 0x100

    def generate_trace_id(self) -> int:
        return self.trace_id

    def generate_span_id(self) -> int:
        self.next_span += 1
        return self.next_span


def chat_trace(trace_id: int, request_id: str, root_name: str = "POST /api/rag/v1/chat/stream") -> list:
    """Spans of one request across three processes, as their SDKs record them."""
    spans = InMemorySpanExporter()
    ids = FixedTraceIds(trace_id)

    def tracer(service: str):
        provider = TracerProvider(resource=Resource.create({"service.name": service}), id_generator=ids)
        provider.add_span_processor(SimpleSpanProcessor(spans))
        return provider.get_tracer("test")

    gateway, retrieval, runtime = tracer("ragmesh-gateway"), tracer("ragmesh-retrieval"), tracer("ragmesh-runtime")
    with gateway.start_as_current_span(root_name, kind=SpanKind.SERVER,
                                       attributes={"ragmesh.request_id": request_id, "http.status_code": 200}):
        with gateway.start_as_current_span("/ragmesh.v1.Retrieval/Search", kind=SpanKind.CLIENT) as call:
            with retrieval.start_as_current_span("/ragmesh.v1.Retrieval/Search", kind=SpanKind.SERVER,
                                                 context=trace.set_span_in_context(call)) as served:
                with runtime.start_as_current_span("POST /embed", kind=SpanKind.SERVER,
                                                   context=trace.set_span_in_context(served)) as embed:
                    embed.set_status(Status(StatusCode.ERROR, "model not loaded"))
                    embed.set_attribute("error.type", "RUNTIME_ERROR")
    return list(spans.get_finished_spans())


class FakeTempo:
    def __init__(self) -> None:
        self.traces: dict[str, list] = {}  # 32-hex trace id -> SDK spans
        self.searches: list[dict[str, list[str]]] = []

    def add(self, spans: list) -> None:
        self.traces[format(spans[0].context.trace_id, "032x")] = spans

    def search(self, q: str) -> list[dict]:
        rid = re.fullmatch(r'\{ span\.ragmesh\.request_id = "([^"]+)" \}', q)
        latest = q == '{ resource.service.name = "ragmesh-gateway" && span.ragmesh.request_id != "" }'
        found = []
        for trace_id, spans in self.traces.items():
            carriers = [s for s in spans if "ragmesh.request_id" in s.attributes]
            if rid and not any(s.attributes["ragmesh.request_id"] == rid.group(1) for s in carriers):
                continue
            if not rid and not (latest and carriers):
                continue
            root = next(s for s in spans if s.parent is None)
            found.append({"traceID": trace_id.lstrip("0"),
                          "rootServiceName": root.resource.attributes["service.name"],
                          "rootTraceName": root.name, "startTimeUnixNano": str(root.start_time),
                          "durationMs": (root.end_time - root.start_time) // 1_000_000})
        return found

    def body(self, trace_id: str) -> dict | None:
        spans = self.traces.get(trace_id)
        if spans is None:
            return None
        return {"batches": MessageToDict(encode_spans(spans))["resourceSpans"]}


@pytest.fixture
def tempo(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeTempo, str]]:
    fake = FakeTempo()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            url = urlsplit(self.path)
            if url.path == "/api/search":
                query = parse_qs(url.query)
                fake.searches.append(query)
                self.reply(200, {"traces": fake.search(query.get("q", [""])[0]), "metrics": {}})
            elif url.path.startswith("/api/traces/"):
                body = fake.body(url.path.rsplit("/", 1)[1])
                self.reply(200, body) if body else self.reply(404, None, text="trace not found")
            else:
                self.reply(404, None, text="404 page not found")

        def reply(self, status: int, body: dict | None, text: str = "") -> None:
            data = json.dumps(body).encode() if body is not None else text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json" if body is not None else "text/plain")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    for name in ("RAGMESH_TRACE_FILE", "RAGMESH_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGMESH_TEMPO_URL", url)
    try:
        yield fake, url
    finally:
        server.shutdown()
        server.server_close()


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["trace", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def walk(nodes: list[dict]) -> Iterator[dict]:
    for node in nodes:
        yield node
        yield from walk(node["children"])


def test_a_request_is_found_by_its_request_id_and_read_as_its_tree(tempo, capsys) -> None:
    fake, _ = tempo
    fake.add(chat_trace(0x00AB << 112 | 0x1234, "req-t"))
    fake.add(chat_trace(0x7777 << 112 | 0x1, "req-other"))
    code, out, err = run(capsys, "req-t", "--json")
    assert code == 0, err
    tree = json.loads(out)
    assert tree["trace_id"] == format(0x00AB << 112 | 0x1234, "032x") and tree["trace_id"].startswith("00ab")
    assert tree["request_id"] == "req-t" and tree["span_count"] == 4
    (root,) = tree["spans"]
    assert (root["service"], root["operation"], root["kind"]) == (
        "ragmesh-gateway", "POST /api/rag/v1/chat/stream", "SERVER")
    assert root["attributes"] == {"ragmesh.request_id": "req-t", "http.status_code": 200}
    chain = [(n["service"], n["kind"]) for n in walk(tree["spans"])]
    assert chain == [("ragmesh-gateway", "SERVER"), ("ragmesh-gateway", "CLIENT"),
                     ("ragmesh-retrieval", "SERVER"), ("ragmesh-runtime", "SERVER")]
    embed = list(walk(tree["spans"]))[-1]
    assert embed["status"] == "ERROR" and embed["attributes"]["error.type"] == "RUNTIME_ERROR"
    assert all(isinstance(n["duration_ms"], float) and n["duration_ms"] >= 0 for n in walk(tree["spans"]))
    (search,) = fake.searches
    assert search["q"] == ['{ span.ragmesh.request_id = "req-t" }']
    assert int(search["start"][0]) < int(search["end"][0])  # the backend's blocks are searched too


def test_the_text_tree_from_tempo_names_every_service(tempo, capsys) -> None:
    fake, _ = tempo
    fake.add(chat_trace(0x42 << 64 | 0x42, "req-text"))
    code, out, _ = run(capsys, "req-text")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith(f"trace {0x42 << 64 | 0x42:032x}  request req-text  4 spans")
    assert [line.split("  ok  ")[-1].strip() for line in lines[2:5]] == [
        "ragmesh-gateway  server  POST /api/rag/v1/chat/stream",
        "ragmesh-gateway  client  /ragmesh.v1.Retrieval/Search",
        "ragmesh-retrieval  server  /ragmesh.v1.Retrieval/Search"]
    assert lines[5].endswith("  ERROR         ragmesh-runtime  server  POST /embed  error.type=RUNTIME_ERROR")


def test_last_is_the_latest_request_tempo_found(tempo, capsys) -> None:
    fake, _ = tempo
    fake.add(chat_trace(0x1 << 64, "req-early"))
    fake.add(chat_trace(0x2 << 64, "req-late"))
    fake.add(chat_trace(0x3 << 64, "probe", root_name="GET /health/ready"))
    code, out, err = run(capsys, "--last", "--json")
    assert code == 0, err
    assert json.loads(out)["request_id"] == "req-late"


def test_an_unknown_request_id_is_one_line_and_exit_2(tempo, capsys) -> None:
    fake, url = tempo
    fake.add(chat_trace(0x5 << 64, "req-t"))
    code, out, err = run(capsys, "req-missing")
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"ragmesh: Tempo at {url} has no trace whose spans carry request id req-missing")


def test_an_unreachable_tempo_is_one_line_and_exit_5(tmp_path: Path, monkeypatch, capsys, free_port) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("RAGMESH_TEMPO_URL", url)
    code, out, err = run(capsys, "req-t")
    assert code == 5 and out == "" and err.count("\n") == 1
    assert err.startswith(f"ragmesh: Tempo unreachable at {url}")


def test_an_explicit_state_folder_is_read_even_when_tempo_is_configured(tempo, tmp_path: Path, capsys) -> None:
    fake, _ = tempo
    fake.add(chat_trace(0x6 << 64, "req-t"))
    state = tmp_path / "state"
    (state / "traces").mkdir(parents=True)
    (state / "traces" / "spans.jsonl").write_text("")
    code, _, err = run(capsys, "req-t", "--state-dir", str(state))
    assert code == 2 and "no span carries request id req-t in " in err
    assert fake.searches == []
