"""Traces, metrics and logs, set up the same way in every process.

- Traces: OpenTelemetry SDK; context crosses HTTP and gRPC through the W3C ``traceparent`` header,
  and the request id through ``X-Request-ID`` (gRPC metadata ``x-request-id``). Exported over
  OTLP/gRPC when ``RAGMESH_OTLP_ENDPOINT`` is set (Compose, Kubernetes), and as JSON lines to
  ``RAGMESH_TRACE_FILE`` when that is set: `ragmesh up` sets it to ``<state>/traces/spans.jsonl``
  (span_file.py), where `ragmesh trace` reads it. With either one set, the client libraries are
  instrumented too: httpx (calls to the model runtime, TEI, vLLM: client spans, and the trace
  continues in the server), redis and asyncpg (one span per command or query, with the statement
  but never its parameters).
- The CLI's indexer commands, which serve no request, start one (:func:`outgoing_request`): a
  request id and a trace that every call of the command carries; the indexer records the id on its
  server spans (``rpc.server.GrpcServer(request_id_on_spans=True)``).
- Calls to model servers carry the trace context and the request id even with no exporter
  (:func:`propagate_context`), and the runtime binds them (:func:`bind_request_id`), so every
  process's log lines for one request share its trace id and request id.
- Logs: one JSON object per line on stderr with service, request_id and trace_id. Callers pass
  ids, hashes, counts and timings only, never query or document text.
- Metrics: prometheus-client; each process exposes /metrics (see ``rpc.server`` and the gateway).
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import logging
import os
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import NonRecordingSpan, SpanContext, StatusCode, TraceFlags

from ragmesh_common.settings import env_int
from ragmesh_common.span_file import DEFAULT_MAX_MB, JsonLinesSpanExporter

request_id_var: contextvars.ContextVar[str] = contextvars.ContextVar("ragmesh_request_id", default="")

REQUEST_ID_HEADER = "x-request-id"
# The span attribute `ragmesh trace` and Tempo find a request by: on the gateway's HTTP server span,
# and on the indexer's gRPC server spans (where the CLI's indexer commands enter the mesh).
REQUEST_ID_ATTRIBUTE = "ragmesh.request_id"
# A request id the gateway accepts from a caller (so every one it issues or echoes), and the only
# kind another process binds to its log context.
REQUEST_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
_WELL_FORMED = re.compile(REQUEST_ID_PATTERN.strip("^$"))

# The ASGI instrumentation's child spans of every request, one per message received or sent ("http
# send", "http receive"): about a third of a search's spans across the mesh, each built, kept and
# exported on the request's path, for nothing `ragmesh trace` shows (span_tree leaves them out).
# Both HTTP servers (gateway, runtime) pass this as OpenTelemetryConfig(exclude_spans=...).
ASGI_MESSAGE_SPANS: list = ["receive", "send"]

_configured: str | None = None
_clients_instrumented = False


def query_hash(text: str) -> str:
    """A short stable hash to correlate a query across logs without logging it."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


class JsonLogFormatter(logging.Formatter):
    def __init__(self, service: str) -> None:
        super().__init__()
        self.service = service

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": round(record.created, 3),
            "level": record.levelname.lower(),
            "service": self.service,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        rid = request_id_var.get()
        if rid:
            entry["request_id"] = rid
        ctx = trace.get_current_span().get_span_context()
        if ctx.is_valid:
            entry["trace_id"] = format(ctx.trace_id, "032x")
            entry["span_id"] = format(ctx.span_id, "016x")
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update(fields)
        if record.exc_info:
            # Server-side only: stack traces stay in the logs, never in a response.
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False, default=str)


def well_formed_request_id(value: str | None) -> bool:
    return bool(value) and _WELL_FORMED.fullmatch(value) is not None


def inject_request_context(headers: Any) -> None:
    """Put the current trace context and request id into a call's ``headers`` (a mutable mapping).
    A client instrumentation, when on, then replaces ``traceparent`` with its client span's; without
    it (no exporter configured) the server still continues this trace."""
    propagate.inject(headers)
    rid = request_id_var.get()
    if rid:
        headers[REQUEST_ID_HEADER] = rid


async def propagate_context(request: Any) -> None:
    """httpx request hook for clients of model servers: the call carries the trace context and the
    request id (inject_request_context)."""
    inject_request_context(request.headers)


def with_request_context(client: Any) -> Any:
    """An ``httpx.AsyncClient`` whose every call carries the trace context and the request id."""
    hooks = client.event_hooks
    if propagate_context not in hooks["request"]:
        client.event_hooks = {**hooks, "request": [*hooks["request"], propagate_context]}
    return client


def bind_request_id(app: Any) -> Any:
    """ASGI wrapper binding a caller's well-formed ``X-Request-ID`` to the log context for the request
    (the runtime's; the gateway issues ids and has its own, web/request_context.py)."""

    async def bound(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        raw = next((v for k, v in scope.get("headers", []) if k.lower() == REQUEST_ID_HEADER.encode()), b"")
        value = raw.decode("latin-1")
        token = request_id_var.set(value if well_formed_request_id(value) else "")
        try:
            await app(scope, receive, send)
        finally:
            request_id_var.reset(token)

    return bound


def record_request_id(span: Any, request_id: str) -> None:
    """``ragmesh.request_id`` on ``span`` when the id is well formed (a caller's metadata is
    untrusted input: a malformed one stays out of telemetry, as it stays out of the logs)."""
    if span is not None and span.is_recording() and well_formed_request_id(request_id):
        span.set_attribute(REQUEST_ID_ATTRIBUTE, request_id)


@contextlib.contextmanager
def outgoing_request(request_id: str) -> Iterator[None]:
    """The calls made inside carry ``request_id`` and one fresh trace, for a process that starts a
    request but serves none and records no span of its own (the CLI's indexer commands).

    The trace is a sampled span context no exporter ever sees: the gRPC client interceptor injects
    it as ``traceparent`` (and ``rpc.client.call_metadata`` sends the request id), so every call of
    one command lands in one trace in the servers, each call's server span a top-level span of it.
    """
    ids = RandomIdGenerator()
    caller = SpanContext(trace_id=ids.generate_trace_id(), span_id=ids.generate_span_id(), is_remote=False,
                         trace_flags=TraceFlags(TraceFlags.SAMPLED))
    rid_token = request_id_var.set(request_id)
    ctx_token = otel_context.attach(trace.set_span_in_context(NonRecordingSpan(caller), otel_context.Context()))
    try:
        yield
    finally:
        otel_context.detach(ctx_token)
        request_id_var.reset(rid_token)


def setup_telemetry(service: str, *, level: str | None = None) -> None:
    """Configure logging and tracing for this process (idempotent)."""
    global _configured
    if _configured == service:
        return
    _configured = service
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonLogFormatter(service))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel((level or os.environ.get("RAGMESH_LOG_LEVEL", "INFO")).upper())
    for noisy in ("httpx", "httpcore", "asyncio", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    provider = TracerProvider(resource=Resource.create({"service.name": f"ragmesh-{service}"}))
    endpoint = os.environ.get("RAGMESH_OTLP_ENDPOINT", "")
    if endpoint:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=endpoint, insecure=True), schedule_delay_millis=200)
        )
    trace_file = os.environ.get("RAGMESH_TRACE_FILE", "")
    if trace_file:
        max_mb = env_int("RAGMESH_TRACE_FILE_MAX_MB", DEFAULT_MAX_MB)
        if max_mb < 1:
            raise SystemExit(f"ragmesh: RAGMESH_TRACE_FILE_MAX_MB={max_mb} must be at least 1")
        exporter = JsonLinesSpanExporter(trace_file, max_bytes=max_mb * 1024 * 1024)
        provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=200))
    trace.set_tracer_provider(provider)
    if endpoint or trace_file:
        instrument_clients()


def instrument_clients() -> None:
    """Spans for the client libraries ragmesh calls through (once per process).

    The instrumentations patch the libraries' classes (httpx's transports, aiohttp's session, redis' and asyncpg's
    command methods), so clients built before this call are traced too. Redis statements are
    recorded as ``COMMAND ? ?`` and SQL without its parameters (the instrumentations' defaults), so
    no key, token or user text reaches a span.
    """
    global _clients_instrumented
    if _clients_instrumented:
        return
    _clients_instrumented = True
    # Each image installs only what its process uses (rerank has no asyncpg), and an instrumentation
    # module imports its library: instrument only the libraries that are there.
    if _installed("httpx"):
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

        HTTPXClientInstrumentor().instrument()
    if _installed("aiohttp"):
        from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor

        AioHttpClientInstrumentor().instrument()
    if _installed("redis"):
        from opentelemetry.instrumentation.redis import RedisInstrumentor

        RedisInstrumentor().instrument()
    if _installed("asyncpg"):
        from opentelemetry.instrumentation.asyncpg import AsyncPGInstrumentor

        AsyncPGInstrumentor(capture_parameters=False).instrument()


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def http_server_span_details(scope: Any) -> tuple[str, dict[str, str]]:
    """Name and route of an HTTP server span, for litestar's ``scope_span_details_extractor``.

    HTTP semantic conventions want ``http.route`` to be the route template and the span named
    ``METHOD template``; litestar's default puts the raw path there, so a file path or an id
    would become a span name (unbounded cardinality, and user input in telemetry).
    """
    route = scope.get("path_template") or scope.get("path", "")
    method = str(scope.get("method", "")).strip()
    return (f"{method} {route}" if method else route), {"http.route": route}


# --- the outcome of the request being served, on its server span ----------------------------------
#
# The HTTP server's span hook binds the request's server span (:func:`bind_request_span`); the code
# that learns how the request ends marks it: an error answer, an ``error`` event at the end of a
# stream, an answer given without some of its parts. The span is the request's root, so a trace
# backend filtered on status ERROR finds these requests by it, not only by a child span that
# failed, and a child span being current at that moment (a gRPC call's) does not matter.

DEGRADED_ATTRIBUTE = "ragmesh.degraded"  # the parts the answer was given without
ERROR_TYPE_ATTRIBUTE = "error.type"  # the error code (OpenTelemetry's name), or "degraded"


@dataclass(slots=True)
class _RequestSpan:
    span: Any
    degraded: list[str] = field(default_factory=list)
    failure: str = ""  # "CODE: message" when the server failed the request

    def apply(self) -> None:
        if self.failure:
            self.span.set_status(StatusCode.ERROR, self.failure)
        elif self.degraded:
            self.span.set_attribute(ERROR_TYPE_ATTRIBUTE, "degraded")
            self.span.set_status(StatusCode.ERROR, "degraded: " + ", ".join(self.degraded))


_request_span: contextvars.ContextVar[_RequestSpan | None] = contextvars.ContextVar(
    "ragmesh_request_span", default=None)


def bind_request_span(span: Any) -> None:
    """The server span of the request this task serves (called by the HTTP server's span hook)."""
    _request_span.set(_RequestSpan(span) if span is not None and span.is_recording() else None)


def mark_request_degraded(reasons: Sequence[str]) -> None:
    """The answer was given without ``reasons`` (``degraded`` flags): ERROR, ``degraded: ...``, and
    the flags as ``ragmesh.degraded``. Nothing to do on a whole answer but this check."""
    if not reasons:
        return
    bound = _request_span.get()
    if bound is None:
        return
    added = [reason for reason in reasons if reason not in bound.degraded]
    if added:
        bound.degraded.extend(added)
        bound.span.set_attribute(DEGRADED_ATTRIBUTE, list(bound.degraded))
        bound.apply()


def mark_request_failed(code: str, message: str, *, server_fault: bool = True) -> None:
    """The request ends in the error ``code``: ``error.type``, and ERROR with ``CODE: message`` when
    the server is at fault (HTTP semantic conventions leave a server span's status unset on a 4xx:
    the caller's mistake is not the server's failure)."""
    bound = _request_span.get()
    if bound is None:
        return
    bound.span.set_attribute(ERROR_TYPE_ATTRIBUTE, code)
    if server_fault:
        bound.failure = f"{code}: {message}"
        bound.apply()


def settle_request_span() -> None:
    """Call when the response starts, after the HTTP instrumentation set the status from the status
    code (on a 5xx it sets ERROR without a description): what was marked before stands."""
    bound = _request_span.get()
    if bound is not None and (bound.failure or bound.degraded):
        bound.apply()


def shutdown_telemetry() -> None:
    provider = trace.get_tracer_provider()
    if isinstance(provider, TracerProvider):
        provider.shutdown()


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


class Stopwatch:
    """Milliseconds since creation; used for timings in logs."""

    def __init__(self) -> None:
        self.start = time.perf_counter()

    @property
    def ms(self) -> float:
        return round((time.perf_counter() - self.start) * 1000, 2)
