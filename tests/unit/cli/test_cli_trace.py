"""`ragmesh trace`: one request's span tree from the state folder's span file (issue 15, part 3).

The span files here are written line by line as the processes' exporter writes them (and once by the
exporter itself), shuffled, so the order on screen comes from the tree, not from the file.
Tempo: tests/unit/cli/test_trace_tempo.py. A real mesh: tests/e2e/test_trace_command.py.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from ragmesh_cli.main import main

TRACE = "0af7651916cd43dd8448eb211c80319c"
OTHER = "5b8efff798038103d269b633813fc60c"
T0 = 1_750_000_000_000_000_000  # ns


def span(service: str, name: str, span_id: str, parent: str | None, start_ms: float, duration_ms: float, *,
         trace: str = TRACE, kind: str = "INTERNAL", status: str = "UNSET", **attributes) -> dict:
    return {"service": f"ragmesh-{service}", "name": name, "kind": kind, "trace_id": trace, "span_id": span_id,
            "parent_id": parent, "start_ns": T0 + round(start_ms * 1e6),
            "end_ns": T0 + round((start_ms + duration_ms) * 1e6), "status": status,
            "attributes": {key.replace("__", "."): value for key, value in attributes.items()}}


def chat_request(trace: str = TRACE, request_id: str = "req-1", at_ms: float = 0.0) -> list[dict]:
    def sid(n: int) -> str:
        return f"{trace[:12]}{n:04x}"

    return [
        span("gateway", "POST /api/rag/v1/chat/stream", sid(1), None, at_ms, 120.0, trace=trace, kind="SERVER",
             ragmesh__request_id=request_id, http__route="/api/rag/v1/chat/stream"),
        span("gateway", "/ragmesh.v1.Generation/Generate", sid(4), sid(1), at_ms + 40.0, 75.5, trace=trace,
             kind="CLIENT"),
        span("gateway", "/ragmesh.v1.Retrieval/Search", sid(2), sid(1), at_ms + 1.25, 30.0, trace=trace,
             kind="CLIENT"),
        span("retrieval", "/ragmesh.v1.Retrieval/Search", sid(3), sid(2), at_ms + 2.0, 28.0, trace=trace,
             kind="SERVER"),
        span("runtime", "POST /embed", sid(6), sid(3), at_ms + 3.0, 9.75, trace=trace, kind="SERVER"),
        span("generation", "/ragmesh.v1.Generation/Generate", sid(5), sid(4), at_ms + 41.0, 74.0, trace=trace,
             kind="SERVER", status="ERROR", error__type="UNAVAILABLE"),
    ]


def write_spans(path: Path, spans: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    shuffled = list(spans)
    random.Random(7).shuffle(shuffled)
    with path.open("a", encoding="utf-8") as out:
        for record in shuffled:
            out.write(json.dumps(record) + "\n")
    return path


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("RAGMESH_TRACE_FILE", "RAGMESH_TEMPO_URL", "RAGMESH_STATE_DIR"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "state"
    folder.mkdir()
    return folder


def spans_file(state: Path) -> Path:
    return state / "traces" / "spans.jsonl"


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["trace", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_the_tree_is_indented_by_depth_with_children_in_start_order(state: Path, capsys) -> None:
    write_spans(spans_file(state), chat_request() + chat_request(OTHER, "req-2", at_ms=500.0))
    code, out, err = run(capsys, "req-1", "--state-dir", str(state))
    assert code == 0, err
    assert out.splitlines() == [
        f"trace {TRACE}  request req-1  6 spans  120.0 ms",
        "  start ms  duration ms  status  service / operation",
        "       0.0        120.0  ok      ragmesh-gateway  server  POST /api/rag/v1/chat/stream",
        "       1.2         30.0  ok        ragmesh-gateway  client  /ragmesh.v1.Retrieval/Search",
        "       2.0         28.0  ok          ragmesh-retrieval  server  /ragmesh.v1.Retrieval/Search",
        "       3.0          9.8  ok            ragmesh-runtime  server  POST /embed",
        "      40.0         75.5  ok        ragmesh-gateway  client  /ragmesh.v1.Generation/Generate",
        "      41.0         74.0  ERROR       ragmesh-generation  server  /ragmesh.v1.Generation/Generate"
        "  error.type=UNAVAILABLE",
    ]


def test_the_asgi_spans_of_each_message_are_left_out_unless_all(state: Path, capsys) -> None:
    sid = TRACE[:12]
    chunks = [span("runtime", "POST /embed http send", f"{sid}{n:04x}", f"{sid}0006", 4.0 + (n - 0x20), 0.1,
                   asgi__event__type="http.response.body") for n in (0x20, 0x21)]
    write_spans(spans_file(state), chat_request() + chunks)
    code, out, _ = run(capsys, "req-1", "--state-dir", str(state))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == (f"trace {TRACE}  request req-1  8 spans  120.0 ms  (2 ASGI send/receive spans not "
                        "shown; --all shows them)")
    assert len(lines) == 2 + 6 and not any("http send" in line for line in lines)
    code, out, _ = run(capsys, "req-1", "--all", "--state-dir", str(state))
    lines = out.splitlines()
    assert lines[0] == f"trace {TRACE}  request req-1  8 spans  120.0 ms" and len(lines) == 2 + 8
    assert lines[6:8] == [
        "       4.0          0.1  ok              ragmesh-runtime  internal  POST /embed http send",
        "       5.0          0.1  ok              ragmesh-runtime  internal  POST /embed http send",
    ]
    code, out, _ = run(capsys, "req-1", "--json", "--state-dir", str(state))
    assert json.loads(out)["span_count"] == 8  # machines get every span


def test_json_is_the_same_tree_with_numbers_as_numbers(state: Path, capsys) -> None:
    write_spans(spans_file(state), chat_request())
    code, out, _ = run(capsys, "req-1", "--json", "--state-dir", str(state))
    assert code == 0
    tree = json.loads(out)
    assert tree["trace_id"] == TRACE and tree["request_id"] == "req-1"
    assert tree["span_count"] == 6 and tree["duration_ms"] == 120.0
    assert tree["services"] == ["ragmesh-gateway", "ragmesh-generation", "ragmesh-retrieval", "ragmesh-runtime"]
    (root,) = tree["spans"]
    assert (root["service"], root["operation"], root["kind"], root["status"]) == (
        "ragmesh-gateway", "POST /api/rag/v1/chat/stream", "SERVER", "UNSET")
    assert root["start_ms"] == 0.0 and root["duration_ms"] == 120.0 and root["parent_id"] is None
    assert root["attributes"]["http.route"] == "/api/rag/v1/chat/stream"
    assert [child["operation"] for child in root["children"]] == [
        "/ragmesh.v1.Retrieval/Search", "/ragmesh.v1.Generation/Generate"]
    retrieval_call = root["children"][0]
    assert retrieval_call["start_ms"] == 1.25 and retrieval_call["duration_ms"] == 30.0
    (embed,) = retrieval_call["children"][0]["children"]
    assert embed["service"] == "ragmesh-runtime" and embed["duration_ms"] == 9.75 and embed["children"] == []
    generate = root["children"][1]["children"][0]
    assert generate["status"] == "ERROR" and generate["attributes"]["error.type"] == "UNAVAILABLE"


def test_a_span_whose_parent_was_not_recorded_is_shown_at_the_top(state: Path, capsys) -> None:
    spans = chat_request()
    spans = [s for s in spans if s["name"] != "/ragmesh.v1.Retrieval/Search" or s["kind"] != "SERVER"]
    write_spans(spans_file(state), spans)
    code, out, _ = run(capsys, "req-1", "--state-dir", str(state))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].endswith("5 spans  120.0 ms")
    assert lines[-1] == ("       3.0          9.8  ok      ragmesh-runtime  server  POST /embed"
                         "  (parent span not recorded)")


def test_spans_in_the_rotated_file_belong_to_the_tree(state: Path, capsys) -> None:
    spans = chat_request()
    write_spans(spans_file(state).with_name("spans.jsonl.1"), spans[:3])
    write_spans(spans_file(state), spans[3:])
    code, out, _ = run(capsys, "req-1", "--json", "--state-dir", str(state))
    assert code == 0 and json.loads(out)["span_count"] == 6


def test_a_line_cut_short_by_a_writer_is_skipped(state: Path, capsys) -> None:
    path = write_spans(spans_file(state), chat_request())
    with path.open("a", encoding="utf-8") as out:
        out.write(json.dumps(span("gateway", "GET /x", "ffff000000000001", None, 9, 1))[:40])
    code, out, _ = run(capsys, "req-1", "--json", "--state-dir", str(state))
    assert code == 0 and json.loads(out)["span_count"] == 6


def test_last_is_the_latest_request_not_a_health_probe(state: Path, capsys) -> None:
    probe = span("gateway", "GET /health/ready", "eeee000000000001", None, 900.0, 2.0,
                 trace="e" * 32, kind="SERVER", ragmesh__request_id="probe", http__route="/health/ready")
    indexing = span("indexer", "index build", "dddd000000000001", None, 950.0, 5.0, trace="d" * 32)
    write_spans(spans_file(state), chat_request() + chat_request(OTHER, "req-2", at_ms=500.0) + [probe, indexing])
    code, out, _ = run(capsys, "--last", "--json", "--state-dir", str(state))
    assert code == 0
    tree = json.loads(out)
    assert (tree["request_id"], tree["trace_id"]) == ("req-2", OTHER)


def test_a_request_id_sent_twice_shows_its_latest_trace_and_says_so(state: Path, capsys) -> None:
    write_spans(spans_file(state), chat_request() + chat_request(OTHER, "req-1", at_ms=500.0))
    code, out, err = run(capsys, "req-1", "--json", "--state-dir", str(state))
    assert code == 0 and json.loads(out)["trace_id"] == OTHER
    assert err == "ragmesh: request id req-1 names 2 traces; showing the latest\n"


def test_the_span_file_named_by_the_environment_is_read(tmp_path: Path, monkeypatch, capsys) -> None:
    path = write_spans(tmp_path / "elsewhere.jsonl", chat_request())
    monkeypatch.delenv("RAGMESH_TEMPO_URL", raising=False)
    monkeypatch.setenv("RAGMESH_TRACE_FILE", str(path))
    code, out, _ = run(capsys, "req-1")
    assert code == 0 and out.startswith(f"trace {TRACE}")


def test_spans_written_by_the_exporter_read_back_as_their_tree(state: Path, capsys) -> None:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    from ragmesh_common.span_file import JsonLinesSpanExporter, default_span_file

    provider = TracerProvider(resource=Resource.create({"service.name": "ragmesh-gateway"}))
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesSpanExporter(default_span_file(state))))
    tracer = provider.get_tracer("test")
    with tracer.start_as_current_span("POST /api/rag/v1/search", attributes={"ragmesh.request_id": "req-9"}):
        with tracer.start_as_current_span("/ragmesh.v1.Retrieval/Search"):
            pass
        with tracer.start_as_current_span("/ragmesh.v1.Rerank/Rerank"):
            pass
    provider.shutdown()
    code, out, err = run(capsys, "req-9", "--state-dir", str(state))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("trace ") and "request req-9  3 spans" in lines[0]
    assert [line.split("  internal  ")[-1] for line in lines[2:]] == [
        "POST /api/rag/v1/search", "/ragmesh.v1.Retrieval/Search", "/ragmesh.v1.Rerank/Rerank"]
    assert "  ok      ragmesh-gateway  internal" in lines[2]  # the root, then its children one step in
    assert all("  ok        ragmesh-gateway  internal" in line for line in lines[3:])


# --- bad input: one line on stderr, a non-zero exit, nothing created ------------------------------

def test_an_unknown_request_id_is_one_line_and_exit_2(state: Path, capsys) -> None:
    write_spans(spans_file(state), chat_request())
    code, out, err = run(capsys, "req-404", "--state-dir", str(state))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("ragmesh: no span carries request id req-404 in ")
    assert str(spans_file(state)) in err


def test_a_state_folder_that_does_not_exist_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    missing = tmp_path / "nowhere"
    code, out, err = run(capsys, "req-1", "--state-dir", str(missing))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"ragmesh: no state folder at {missing}")
    assert not missing.exists()


def test_a_state_folder_without_spans_is_one_line_and_exit_1(state: Path, capsys) -> None:
    code, out, err = run(capsys, "--last", "--state-dir", str(state))
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith(f"ragmesh: no spans recorded at {spans_file(state)}")
    assert not (state / "traces").exists()


def test_last_with_no_request_recorded_is_one_line_and_exit_1(state: Path, capsys) -> None:
    write_spans(spans_file(state), [span("indexer", "index build", "dddd000000000001", None, 0, 5, trace="d" * 32)])
    code, out, err = run(capsys, "--last", "--state-dir", str(state))
    assert code == 1 and out == "" and err.count("\n") == 1 and "no request" in err


@pytest.mark.parametrize("args", [[], ["req-1", "--last"]])
def test_either_a_request_id_or_last_is_required(state: Path, capsys, args: list[str]) -> None:
    code, out, err = run(capsys, *args, "--state-dir", str(state))
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == "ragmesh: give a REQUEST_ID or --last (not both)"


def test_last_waits_for_the_spans_of_the_clis_own_last_request(state: Path, capsys) -> None:
    """`ragmesh answer` then `ragmesh trace --last` (the README's order): the gateway writes the
    answer's spans a moment after it ends, and on a busy machine `trace` can start before that (seen
    in a test run: the trace of the search before). The CLI noted the id it sent; `--last` waits."""
    import threading
    import time

    from ragmesh_cli import last_request

    write_spans(spans_file(state), chat_request())  # an earlier request, written
    last_request.remember(state, "req-2", T0 + 400_000_000)  # sent after it; its spans are still on their way
    later = threading.Timer(0.5, write_spans, (spans_file(state), chat_request(OTHER, "req-2", at_ms=500.0)))
    later.start()
    started = time.monotonic()
    code, out, err = run(capsys, "--last", "--state-dir", str(state))
    later.join()
    assert code == 0, err
    assert out.startswith(f"trace {OTHER}  request req-2 "), out
    assert time.monotonic() - started >= 0.4


def test_a_request_newer_than_the_clis_own_is_shown_at_once(state: Path, capsys) -> None:
    from ragmesh_cli import last_request

    last_request.remember(state / "nowhere", "req-0", T0)  # no mesh folder there: nothing noted
    spans_file(state).parent.mkdir(parents=True)
    last_request.remember(state, "req-1", T0 + 100_000_000)
    write_spans(spans_file(state), chat_request() + chat_request(OTHER, "req-2", at_ms=500.0))
    code, out, err = run(capsys, "--last", "--state-dir", str(state))
    assert code == 0 and out.startswith(f"trace {OTHER}  request req-2 "), (out, err)


def test_the_clis_own_request_that_never_shows_is_named_and_the_latest_recorded_shown(
    state: Path, capsys, monkeypatch
) -> None:
    from ragmesh_cli import last_request
    from ragmesh_cli.trace.sources import SpanFileSource

    write_spans(spans_file(state), chat_request())
    last_request.remember(state, "req-lost", T0 + 400_000_000)
    monkeypatch.setattr(SpanFileSource, "SENT_WAIT_S", 0.3)
    code, out, err = run(capsys, "--last", "--state-dir", str(state))
    assert code == 0 and out.startswith(f"trace {TRACE}  request req-1 "), (out, err)
    assert "the CLI's last request (req-lost) has no spans after" in err
