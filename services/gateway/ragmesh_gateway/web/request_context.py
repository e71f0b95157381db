"""Outermost ASGI layer: one request id per request, request metrics, and one access log line.

It wraps Litestar's whole ASGI handler rather than running as Litestar middleware, because
Litestar middleware only runs after routing: 404/405 answers and the mounted MCP app would
otherwise get no request id and no metrics.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

from ragmesh_common import metrics
from ragmesh_common.telemetry import (
    REQUEST_ID_HEADER,
    request_id_var,
    settle_request_span,
    well_formed_request_id,
)

log = logging.getLogger("ragmesh.gateway.http")

# Scope-state key where the edge checks leave headers for this response: the rate limiter's
# RateLimit-* (and Retry-After), and Ragmesh-Auth when a token went unchecked.
EDGE_HEADERS = "edge_headers"
# Scope-state key where the server span's hook (app.py) leaves its trace and span ids: this layer
# runs outside the span, and its access log line must carry them like every other line.
SPAN_IDS = "span_ids"
_QUIET_ROUTES = frozenset({"/health/live", "/health/ready", "/metrics"})


def accept_request_id(value: str | None) -> str:
    """The caller's id when it is safe to echo and log, else a fresh one."""
    if value and well_formed_request_id(value):
        return value
    return uuid.uuid4().hex


def note_span(scope: Any, span: Any) -> None:
    """Remember the request's server span for the access log line."""
    ctx = span.get_span_context()
    if ctx.is_valid:
        scope.setdefault("state", {})[SPAN_IDS] = {"trace_id": format(ctx.trace_id, "032x"),
                                                   "span_id": format(ctx.span_id, "016x")}


def request_id_of(scope: Any) -> str:
    return scope.get("state", {}).get("request_id", "") or request_id_var.get()


def route_label(scope: Any) -> str:
    """The route template, never the raw path (bounded label cardinality)."""
    handler = scope.get("route_handler")
    if handler is not None and getattr(handler, "is_mount", False):
        return sorted(handler.paths)[0]
    return scope.get("path_template") or "unmatched"


def _edge_headers(scope: Any, present: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The edge checks' headers for this request, except any the response already has."""
    edge = scope.get("state", {}).get(EDGE_HEADERS) or {}
    have = {k.lower() for k, _ in present}
    return [(k.lower().encode(), v.encode()) for k, v in edge.items() if k.lower().encode() not in have]


class RequestContextMiddleware:
    def __init__(self, app: Any, *, service: str = "gateway") -> None:
        self.app = app
        self.service = service

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = [(k, v) for k, v in scope.get("headers", []) if k.lower() != REQUEST_ID_HEADER.encode()]
        incoming = next(
            (v for k, v in scope.get("headers", []) if k.lower() == REQUEST_ID_HEADER.encode()), None
        )
        request_id = accept_request_id(incoming.decode("latin-1") if incoming else None)
        # Mounted apps (MCP) read the effective id from the headers, so rewrite it there too.
        scope["headers"] = [*headers, (REQUEST_ID_HEADER.encode(), request_id.encode())]
        scope.setdefault("state", {})["request_id"] = request_id
        token = request_id_var.set(request_id)
        start = time.perf_counter()
        status = 500

        async def send_with_id(message: Any) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                out = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != REQUEST_ID_HEADER.encode()
                ]
                out.extend(_edge_headers(scope, out))
                message = {**message, "headers": [*out, (REQUEST_ID_HEADER.encode(), request_id.encode())]}
                # The server span's instrumentation has just set its status from the status code.
                settle_request_span()
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - start
            route = route_label(scope)
            method = scope.get("method", "")
            metrics.HTTP_REQUESTS.labels(self.service, route, method, str(status)).inc()
            metrics.HTTP_DURATION.labels(self.service, route, method).observe(elapsed)
            log.log(
                logging.DEBUG if route in _QUIET_ROUTES else logging.INFO,
                "request",
                extra={
                    "fields": {
                        **scope.get("state", {}).get(SPAN_IDS, {}),
                        "method": method,
                        "route": route,
                        "status": status,
                        "ms": round(elapsed * 1000, 2),
                    }
                },
            )
            request_id_var.reset(token)
