"""Prometheus metrics shared by every process. Service-specific metrics live in their services."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

GRPC_SERVER_REQUESTS = Counter(
    "ragmesh_grpc_server_requests", "gRPC requests handled", ["service", "method", "code"]
)
GRPC_SERVER_DURATION = Histogram(
    "ragmesh_grpc_server_duration_seconds", "gRPC handler duration", ["service", "method"],
    buckets=LATENCY_BUCKETS,
)
HTTP_REQUESTS = Counter(
    "ragmesh_http_requests", "HTTP requests handled", ["service", "route", "method", "status"]
)
HTTP_DURATION = Histogram(
    "ragmesh_http_request_duration_seconds", "HTTP request duration", ["service", "route", "method"],
    buckets=LATENCY_BUCKETS,
)
DEGRADED = Counter(
    "ragmesh_degraded", "Requests served with a degraded component", ["service", "component"]
)
RETRIEVAL_STAGE_DURATION = Histogram(
    "ragmesh_retrieval_stage_duration_seconds", "Duration of one retrieval stage",
    ["stage"], buckets=LATENCY_BUCKETS,
)
