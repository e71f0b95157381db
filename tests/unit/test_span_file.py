"""The span file every process of the embedded mesh appends to: whole lines, bounded in size.

Six processes share ``<state>/traces/spans.jsonl``. Each batch is one append under a lock on
``spans.jsonl.lock``; when a batch would take the file past its cap the writer moves it to
``spans.jsonl.1`` (dropping the older one), so the two never hold more than twice the cap.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
from pathlib import Path

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragmesh_common.span_file import JsonLinesSpanExporter, default_span_file, read_span_records


def finished_spans(count: int, service: str = "ragmesh-test", prefix: str = "op") -> list:
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("test")
    for n in range(count):
        with tracer.start_as_current_span(f"{prefix}-{n}", attributes={"n": n, "tags": ("a", "b")}):
            pass
    return list(memory.get_finished_spans())


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def test_the_embedded_default_puts_spans_in_the_state_folder(tmp_path: Path) -> None:
    assert default_span_file(tmp_path) == tmp_path / "traces" / "spans.jsonl"


def test_a_span_is_one_json_line_with_its_ids_times_and_status(tmp_path: Path) -> None:
    path = tmp_path / "traces" / "spans.jsonl"  # the folder is made on first export
    (one,) = finished_spans(1)
    assert JsonLinesSpanExporter(path).export([one]) is SpanExportResult.SUCCESS
    (record,) = lines_of(path)
    assert record["service"] == "ragmesh-test" and record["name"] == "op-0" and record["kind"] == "INTERNAL"
    assert record["trace_id"] == format(one.context.trace_id, "032x")
    assert record["span_id"] == format(one.context.span_id, "016x") and record["parent_id"] is None
    assert (record["start_ns"], record["end_ns"]) == (one.start_time, one.end_time)
    assert record["status"] == "UNSET" and record["attributes"] == {"n": 0, "tags": ["a", "b"]}


def test_a_full_file_is_rotated_and_the_pair_stays_under_twice_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    cap = 4096
    exporter = JsonLinesSpanExporter(path, max_bytes=cap)
    batches = [finished_spans(3, prefix=f"b{b}") for b in range(40)]
    for batch in batches:
        assert exporter.export(batch) is SpanExportResult.SUCCESS
    backup = path.with_name("spans.jsonl.1")
    assert 0 < path.stat().st_size <= cap and 0 < backup.stat().st_size <= cap
    kept = [record["name"] for record in read_span_records(path)]
    assert kept[-3:] == ["b39-0", "b39-1", "b39-2"]  # the newest batch is kept, older ones dropped
    assert "b0-0" not in kept and len(kept) == len(set(kept))
    assert kept == [r["name"] for r in lines_of(backup)] + [r["name"] for r in lines_of(path)]


def _append_batches(path: str, writer: int, batches: int, cap: int) -> None:
    exporter = JsonLinesSpanExporter(Path(path), max_bytes=cap)
    for b in range(batches):
        exporter.export(finished_spans(4, service=f"writer-{writer}", prefix=f"w{writer}-b{b}"))


def test_several_processes_append_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_append_batches, args=(str(path), w, 60, 1 << 30)) for w in range(3)]
    for proc in writers:
        proc.start()
    for proc in writers:
        proc.join(60)
        assert proc.exitcode == 0
    records = lines_of(path)  # every line parses: no two appends interleaved
    assert len(records) == 3 * 60 * 4
    for w in range(3):
        names = [r["name"] for r in records if r["service"] == f"writer-{w}"]
        assert names == [f"w{w}-b{b}-{n}" for b in range(60) for n in range(4)]


def test_several_processes_rotating_keep_whole_lines_and_the_cap(tmp_path: Path) -> None:
    path = tmp_path / "spans.jsonl"
    cap = 16 * 1024
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_append_batches, args=(str(path), w, 80, cap)) for w in range(3)]
    for proc in writers:
        proc.start()
    for proc in writers:
        proc.join(60)
        assert proc.exitcode == 0
    backup = path.with_name("spans.jsonl.1")
    assert path.stat().st_size <= cap and backup.stat().st_size <= cap
    kept = lines_of(backup) + lines_of(path)  # both parse line by line
    assert kept
    for w in range(3):  # what is kept of each writer is in the order it wrote it, oldest file first
        mine = [r["name"] for r in kept if r["service"] == f"writer-{w}"]
        order = [tuple(map(int, name.split("-b")[1].split("-"))) for name in mine]
        assert order == sorted(order)


def test_a_file_that_cannot_be_written_fails_the_export_with_one_warning(tmp_path: Path, caplog) -> None:
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    exporter = JsonLinesSpanExporter(blocker / "spans.jsonl")
    with caplog.at_level(logging.WARNING, logger="ragmesh.telemetry"):
        assert exporter.export(finished_spans(1)) is SpanExportResult.FAILURE
        assert exporter.export(finished_spans(1)) is SpanExportResult.FAILURE
    warnings = [r for r in caplog.records if r.name == "ragmesh.telemetry"]
    assert len(warnings) == 1 and str(blocker / "spans.jsonl") in warnings[0].getMessage()


def test_reading_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "traces" / "spans.jsonl"
    assert list(read_span_records(path)) == []
    assert not (tmp_path / "traces").exists()


def test_a_span_folder_removed_while_serving_is_made_again(tmp_path: Path) -> None:
    path = tmp_path / "traces" / "spans.jsonl"
    exporter = JsonLinesSpanExporter(path)
    assert exporter.export(finished_spans(1)) is SpanExportResult.SUCCESS
    for leftover in path.parent.iterdir():
        leftover.unlink()
    path.parent.rmdir()
    assert exporter.export(finished_spans(1, prefix="again")) is SpanExportResult.SUCCESS
    assert [r["name"] for r in lines_of(path)] == ["again-0"]
