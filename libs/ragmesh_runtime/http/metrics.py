"""Prometheus metrics of the runtime: requests and their duration per endpoint, the batched model
passes (requests and tokens per pass, each request's wait in the queue, by the priority of the
pass's jobs), and /metrics itself.

Each app gets its own registry, so several apps in one process (tests) never collide. Unknown
paths are counted under endpoint="other" so a scanner cannot blow up the label set.
"""

from __future__ import annotations

import time
from typing import Sequence

from litestar import Request, Response, get
from litestar.types import ASGIApp, Receive, Scope, Send
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest

from ragmesh_runtime.batching import Priority

ENDPOINTS = frozenset(
    {"/embed", "/rerank", "/info", "/health", "/metrics", "/v1/chat/completions", "/v1/models"}
)


class RuntimeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "ragmesh_runtime_requests_total",
            "HTTP requests received by the model runtime, by endpoint.",
            ["endpoint"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "ragmesh_runtime_request_duration_seconds",
            "Time from request start to the last byte of the response, by endpoint.",
            ["endpoint"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0),
            registry=self.registry,
        )
        self.responses = Counter(
            "ragmesh_runtime_responses_total",
            "HTTP responses sent by the model runtime, by endpoint and status code.",
            ["endpoint", "status"],
            registry=self.registry,
        )

        # ragmesh_runtime.batching: one observation per model pass shared by /embed and /rerank. A
        # pass holds jobs of one priority (interactive, or an index build's bulk), so each is labelled
        # with it: a search's wait is read apart from a build's.
        self.batch_requests = Histogram(
            "ragmesh_runtime_batch_requests",
            "Requests (/embed and /rerank) that shared one model pass, by priority.",
            ["priority"],
            buckets=(1, 2, 4, 8, 16, 32, 64, 128),
            registry=self.registry,
        )
        self.batch_tokens = Histogram(
            "ragmesh_runtime_batch_tokens",
            "Tokens the model computed in one pass (sequences it held no cached vector for), by priority.",
            ["priority"],
            buckets=(0, 16, 64, 256, 1024, 4096, 16384),
            registry=self.registry,
        )
        self.queue_wait = Histogram(
            "ragmesh_runtime_queue_wait_seconds",
            "Time a request waited between admission and the start of its model pass, by priority.",
            ["priority"],
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
            registry=self.registry,
        )
        for priority in Priority:  # both series from the start, so a rate over them is never absent
            for histogram in (self.batch_requests, self.batch_tokens, self.queue_wait):
                histogram.labels(priority.value)

    def observe_batch(self, requests: int, tokens: int, queue_waits: Sequence[float], priority: Priority) -> None:
        self.batch_requests.labels(priority.value).observe(requests)
        self.batch_tokens.labels(priority.value).observe(tokens)
        queue_wait = self.queue_wait.labels(priority.value)
        for wait in queue_waits:
            queue_wait.observe(wait)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        async def measured(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            path = scope["path"].rstrip("/") or "/"
            endpoint = path if path in ENDPOINTS else "other"
            self.requests.labels(endpoint).inc()
            started = time.perf_counter()
            status = "500"

            async def send_and_note_status(message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = str(message["status"])
                await send(message)

            try:
                await app(scope, receive, send_and_note_status)
            finally:
                self.duration.labels(endpoint).observe(time.perf_counter() - started)
                self.responses.labels(endpoint, status).inc()

        return measured


@get("/metrics", sync_to_thread=False)
def metrics_endpoint(request: Request) -> Response[bytes]:
    registry = request.app.state.runtime_metrics.registry
    return Response(content=generate_latest(registry), media_type=CONTENT_TYPE_LATEST)
