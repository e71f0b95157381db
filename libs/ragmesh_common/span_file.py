"""The span file: finished spans as JSON lines, shared by the processes of one mesh, bounded in size.

The embedded mesh (`ragmesh up`) gives every process ``RAGMESH_TRACE_FILE=<state>/traces/spans.jsonl``
(:func:`default_span_file`); `ragmesh trace` reads it back. Compose and Kubernetes set no file and
export over OTLP instead.

Writing: each process exports a batch as one ``write()`` to the file opened ``O_APPEND``, holding an
exclusive ``flock`` on ``<file>.lock``, so lines of several processes never interleave. A batch
that would take the file past ``max_bytes`` first moves it to ``<file>.1``, replacing the older
one: the pair holds at most twice the cap (plus one batch), and the oldest spans go first.

Reading: ``<file>.1`` then ``<file>``, under a shared lock when the lock file exists, skipping a line
that does not parse (one cut short by a full disk).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger("ragmesh.telemetry")

DEFAULT_MAX_MB = 32


def default_span_file(state_dir: Path) -> Path:
    """Where the embedded mesh under ``state_dir`` writes its spans."""
    return Path(state_dir) / "traces" / "spans.jsonl"


def rotated(path: Path) -> Path:
    return path.with_name(path.name + ".1")


def _lock_file(path: Path) -> Path:
    return path.with_name(path.name + ".lock")


def span_record(span: ReadableSpan) -> dict[str, Any]:
    """One span as its line in the file (and as `ragmesh trace` reads it, from here or Tempo)."""
    ctx = span.get_span_context()
    parent = span.parent
    record: dict[str, Any] = {
        "service": span.resource.attributes.get("service.name"),
        "name": span.name,
        "kind": span.kind.name,
        "trace_id": format(ctx.trace_id, "032x"),
        "span_id": format(ctx.span_id, "016x"),
        "parent_id": format(parent.span_id, "016x") if parent else None,
        "start_ns": span.start_time,
        "end_ns": span.end_time,
        "status": span.status.status_code.name,
        "attributes": {k: _jsonable(v) for k, v in (span.attributes or {}).items()},
    }
    if span.status.description:
        record["status_message"] = span.status.description
    return record


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return list(value)


class JsonLinesSpanExporter(SpanExporter):
    """Appends finished spans to the span file; several processes may share one file."""

    def __init__(self, path: str | Path, *, max_bytes: int = DEFAULT_MAX_MB * 1024 * 1024) -> None:
        self.path = Path(path)
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._warned = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        data = "".join(json.dumps(span_record(span)) + "\n" for span in spans).encode()
        try:
            with self._lock:
                try:
                    self._append(data)
                except FileNotFoundError:  # no folder yet (the first export), or removed since
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._append(data)
        except OSError as exc:
            if not self._warned:  # once: a span file that cannot be written must not flood the log
                self._warned = True
                log.warning("spans not written to %s: %s", self.path, exc.strerror or exc)
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def _append(self, data: bytes) -> None:
        with _flock(_lock_file(self.path), fcntl.LOCK_EX, create=True):
            self._rotate_if_full(len(data))
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
            finally:
                os.close(fd)

    def _rotate_if_full(self, incoming: int) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size and size + incoming > self.max_bytes:
            os.replace(self.path, rotated(self.path))

    def shutdown(self) -> None:  # nothing buffered here
        return None


@contextlib.contextmanager
def _flock(path: Path, operation: int, *, create: bool) -> Iterator[None]:
    try:
        fd = os.open(path, (os.O_RDWR | os.O_CREAT) if create else os.O_RDONLY, 0o644)
    except FileNotFoundError:
        if create:
            raise
        yield  # no writer has run yet: nothing to wait for
        return
    try:
        fcntl.flock(fd, operation)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def read_span_records(path: Path, *, containing: bytes = b"") -> Iterator[dict[str, Any]]:
    """Every span in the file and its rotated predecessor, oldest file first. Creates nothing.

    ``containing``: only lines holding these bytes are parsed, a cheap first cut through a file of
    many requests (the lines are :func:`span_record` as ``json.dumps`` writes it).
    """
    path = Path(path)
    with _flock(_lock_file(path), fcntl.LOCK_SH, create=False):
        lines: list[bytes] = []
        for part in (rotated(path), path):
            try:
                lines.extend(line for line in part.read_bytes().splitlines() if containing in line)
            except FileNotFoundError:
                continue
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("trace_id") and record.get("span_id"):
            yield record


def span_file_exists(path: Path) -> bool:
    path = Path(path)
    return path.is_file() or rotated(path).is_file()
