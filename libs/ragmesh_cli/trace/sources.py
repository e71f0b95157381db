"""Where `ragmesh trace` finds a request's spans: the embedded mesh's span file, or Tempo.

A request is found by its request id (the ``X-Request-ID`` the gateway echoes, issued by it when the
caller sent none), which the gateway records on its server span as ``ragmesh.request_id``, and the
indexer on each of its gRPC server spans (the id an indexer command of the CLI printed); the trace is
then every span with that span's trace id. Both sources answer :class:`FoundTrace`, and
say what went wrong with a :class:`TraceLookupError` carrying the CLI's exit code.
"""

from __future__ import annotations

import base64
import binascii
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from ragmesh_cli.last_request import recall
from ragmesh_cli.output import EXIT_FAIL, EXIT_UNAVAILABLE, EXIT_USAGE
from ragmesh_common.span_file import read_span_records
from ragmesh_common.telemetry import REQUEST_ID_ATTRIBUTE
# Server spans of these routes carry request ids too, but nobody asks for "the last health probe".
_NOT_REQUESTS = ("/health/", "/metrics")


class TraceLookupError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message, self.exit_code = message, exit_code


@dataclass
class FoundTrace:
    trace_id: str
    request_id: str
    spans: list[dict[str, Any]]
    note: str = ""  # said on stderr: which of several traces is shown


def is_request(span: dict[str, Any]) -> bool:
    route = str(span["attributes"].get("http.route") or span.get("name", "").partition(" ")[2])
    return not route.startswith(_NOT_REQUESTS)


class SpanFileSource:
    # How long `--last` waits for the spans of the CLI's own last request (ragmesh_cli.last_request).
    SENT_WAIT_S = 15.0

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def by_request_id(self, request_id: str, *, wait_s: float = 0.0) -> FoundTrace:
        """The trace of ``request_id``; with ``wait_s``, read again until its spans are written."""
        marker = f'"{REQUEST_ID_ATTRIBUTE}": "{request_id}"'.encode()
        deadline = time.monotonic() + wait_s
        while True:
            carriers = [s for s in read_span_records(self.path, containing=marker)
                        if s.get("attributes", {}).get(REQUEST_ID_ATTRIBUTE) == request_id]
            if carriers:
                return self._trace_of(carriers, request_id)
            if time.monotonic() >= deadline:
                raise TraceLookupError(
                    f"no span carries request id {request_id} in {self.path} (spans are written a moment after "
                    "a request ends; an older request may have been rotated out)", EXIT_USAGE)
            time.sleep(0.1)

    def last(self) -> FoundTrace:
        """The latest request in the file; or the CLI's own last request to this mesh when it was sent
        after that one, once its spans are written (up to SENT_WAIT_S)."""
        marker = f'"{REQUEST_ID_ATTRIBUTE}": '.encode()
        roots = [s for s in read_span_records(self.path, containing=marker)
                 if not s.get("parent_id") and s.get("attributes", {}).get(REQUEST_ID_ATTRIBUTE) and is_request(s)]
        latest = max(roots, key=lambda s: s.get("start_ns") or 0) if roots else None
        sent = recall(self.path)
        if sent is not None and (latest is None or sent.sent_ns > (latest.get("start_ns") or 0)):
            try:
                return self.by_request_id(sent.request_id, wait_s=self.SENT_WAIT_S)
            except TraceLookupError:
                if latest is None:
                    raise
                found = self._trace_of([latest], latest["attributes"][REQUEST_ID_ATTRIBUTE])
                found.note = (f"the CLI's last request ({sent.request_id}) has no spans after "
                              f"{self.SENT_WAIT_S:.0f} s; showing the latest request recorded")
                return found
        if latest is None:
            raise TraceLookupError(f"no request recorded in {self.path} yet", EXIT_FAIL)
        return self._trace_of([latest], latest["attributes"][REQUEST_ID_ATTRIBUTE])

    def _trace_of(self, carriers: list[dict[str, Any]], request_id: str) -> FoundTrace:
        latest = max(carriers, key=lambda s: s.get("start_ns") or 0)
        traces = {s["trace_id"] for s in carriers}
        spans = [s for s in read_span_records(self.path, containing=latest["trace_id"].encode())
                 if s["trace_id"] == latest["trace_id"]]
        note = (f"request id {request_id} names {len(traces)} traces; showing the latest"
                if len(traces) > 1 else "")
        return FoundTrace(latest["trace_id"], request_id, spans, note)


class TempoSource:
    """Tempo's HTTP API: ``GET /api/search`` with a TraceQL query over a time window (``start`` and
    ``end`` make Tempo search its backend blocks, not only recent data), then
    ``GET /api/traces/<trace id>`` for the spans."""

    SEARCH_HOURS = 24  # how far back a request id is looked for
    LAST_HOURS = 1  # and the latest request

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def by_request_id(self, request_id: str) -> FoundTrace:
        hits = self._search(f'{{ span.{REQUEST_ID_ATTRIBUTE} = "{request_id}" }}', self.SEARCH_HOURS, limit=20)
        if not hits:
            raise TraceLookupError(
                f"Tempo at {self.url} has no trace whose spans carry request id {request_id} in the last "
                f"{self.SEARCH_HOURS} hours", EXIT_USAGE)
        latest = max(hits, key=_search_start)
        note = f"request id {request_id} names {len(hits)} traces; showing the latest" if len(hits) > 1 else ""
        trace_id = _hex_trace_id(latest["traceID"])
        return FoundTrace(trace_id, request_id, self._spans(trace_id), note)

    def last(self) -> FoundTrace:
        query = f'{{ resource.service.name = "ragmesh-gateway" && span.{REQUEST_ID_ATTRIBUTE} != "" }}'
        hits = [hit for hit in self._search(query, self.LAST_HOURS, limit=100)
                if not str(hit.get("rootTraceName", "")).partition(" ")[2].startswith(_NOT_REQUESTS)]
        if not hits:
            raise TraceLookupError(f"Tempo at {self.url} holds no request from the last {self.LAST_HOURS} hour",
                                   EXIT_FAIL)
        trace_id = _hex_trace_id(max(hits, key=_search_start)["traceID"])
        spans = self._spans(trace_id)
        request_id = next((str(s["attributes"][REQUEST_ID_ATTRIBUTE]) for s in spans
                           if not s.get("parent_id") and s["attributes"].get(REQUEST_ID_ATTRIBUTE)), "")
        return FoundTrace(trace_id, request_id, spans)

    def _search(self, query: str, hours: int, *, limit: int) -> list[dict[str, Any]]:
        end = int(time.time()) + 60
        params = {"q": query, "start": str(end - hours * 3600 - 60), "end": str(end), "limit": str(limit)}
        body = self._get("/api/search", params=params, what="search")
        return list((body or {}).get("traces") or [])

    def _spans(self, trace_id: str) -> list[dict[str, Any]]:
        body = self._get(f"/api/traces/{trace_id}", what=f"trace {trace_id}")
        if body is None:
            raise TraceLookupError(f"Tempo at {self.url} found trace {trace_id} in its search but not by id",
                                   EXIT_UNAVAILABLE)
        return otlp_json_spans(body)

    def _get(self, path: str, *, what: str, params: dict[str, str] | None = None) -> dict[str, Any] | None:
        try:
            resp = httpx.get(self.url + path, params=params, timeout=self.timeout,
                             headers={"Accept": "application/json"})
        except httpx.HTTPError as exc:
            raise TraceLookupError(f"Tempo unreachable at {self.url} ({type(exc).__name__})",
                                   EXIT_UNAVAILABLE) from None
        if resp.status_code == 404:
            return None
        if resp.status_code != 200:
            said = " ".join(resp.text.split())[:200]
            raise TraceLookupError(f"Tempo at {self.url} answered {resp.status_code} to the {what}: {said}",
                                   EXIT_UNAVAILABLE)
        try:
            return resp.json()
        except ValueError:
            raise TraceLookupError(f"Tempo at {self.url} answered the {what} with something not JSON",
                                   EXIT_UNAVAILABLE) from None


def _search_start(hit: dict[str, Any]) -> int:
    try:
        return int(hit.get("startTimeUnixNano") or 0)
    except (TypeError, ValueError):
        return 0


def _hex_trace_id(value: str) -> str:
    """Tempo's search results drop a trace id's leading zeros."""
    return str(value).lower().zfill(32)


# --- OTLP JSON (protobuf's JSON mapping, as Tempo answers /api/traces) into span records ---------

_KINDS = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
_STATUSES = {0: "UNSET", 1: "OK", 2: "ERROR"}


def otlp_json_spans(body: dict[str, Any]) -> list[dict[str, Any]]:
    trace = body.get("trace") if isinstance(body.get("trace"), dict) else body
    spans = []
    for resource_spans in trace.get("batches") or trace.get("resourceSpans") or []:
        resource = _attributes((resource_spans.get("resource") or {}).get("attributes"))
        scopes = resource_spans.get("scopeSpans") or resource_spans.get("instrumentationLibrarySpans") or []
        for scope in scopes:
            for span in scope.get("spans") or []:
                status = span.get("status") or {}
                record = {
                    "service": resource.get("service.name"),
                    "name": span.get("name", ""),
                    "kind": _enum(span.get("kind"), "SPAN_KIND_", _KINDS, "UNSPECIFIED"),
                    "trace_id": _hex_id(span.get("traceId"), 16),
                    "span_id": _hex_id(span.get("spanId"), 8),
                    "parent_id": _hex_id(span.get("parentSpanId"), 8),
                    "start_ns": int(span.get("startTimeUnixNano") or 0),
                    "end_ns": int(span.get("endTimeUnixNano") or 0),
                    "status": _enum(status.get("code"), "STATUS_CODE_", _STATUSES, "UNSET"),
                    "attributes": _attributes(span.get("attributes")),
                }
                if status.get("message"):
                    record["status_message"] = status["message"]
                spans.append(record)
    return spans


def _hex_id(value: Any, size: int) -> str | None:
    """Span and trace ids: hex in OTLP's own JSON, base64 in protobuf's mapping (Tempo's)."""
    if not value:
        return None
    text = str(value)
    if len(text) == size * 2:
        try:
            bytes.fromhex(text)
            return text.lower()
        except ValueError:
            pass
    try:
        return base64.b64decode(text, validate=True).hex().zfill(size * 2)
    except (binascii.Error, ValueError):
        return text.lower()


def _enum(value: Any, prefix: str, names: dict[int, str], default: str) -> str:
    if isinstance(value, int):
        return names.get(value, default)
    if isinstance(value, str) and value:
        return value.removeprefix(prefix)
    return default


def _attributes(items: Any) -> dict[str, Any]:
    return {item["key"]: _value(item.get("value") or {}) for item in items or [] if "key" in item}


def _value(value: dict[str, Any]) -> Any:
    if "stringValue" in value:
        return value["stringValue"]
    if "boolValue" in value:
        return bool(value["boolValue"])
    if "intValue" in value:
        return int(value["intValue"])
    if "doubleValue" in value:
        return float(value["doubleValue"])
    if "arrayValue" in value:
        return [_value(v) for v in (value["arrayValue"] or {}).get("values") or []]
    if "kvlistValue" in value:
        return _attributes((value["kvlistValue"] or {}).get("values"))
    if "bytesValue" in value:
        return value["bytesValue"]
    return None
