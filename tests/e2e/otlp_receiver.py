"""A tiny OTLP/gRPC trace receiver: what an OpenTelemetry Collector would get, kept in memory.

The mesh's processes export to it exactly as they export to the collector in production
(``RAGMESH_OTLP_ENDPOINT=http://127.0.0.1:<port>``, the SDK's OTLPSpanExporter over gRPC).
"""

from __future__ import annotations

import threading
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Callable

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span as SpanProto

KINDS = {
    SpanProto.SPAN_KIND_INTERNAL: "INTERNAL",
    SpanProto.SPAN_KIND_SERVER: "SERVER",
    SpanProto.SPAN_KIND_CLIENT: "CLIENT",
    SpanProto.SPAN_KIND_PRODUCER: "PRODUCER",
    SpanProto.SPAN_KIND_CONSUMER: "CONSUMER",
}


@dataclass(frozen=True)
class ReceivedSpan:
    service: str
    name: str
    kind: str
    trace_id: str
    span_id: str
    parent_id: str | None
    attributes: dict[str, Any]


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, which) if which else None


class TraceReceiver(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self) -> None:
        self._spans: list[ReceivedSpan] = []
        self._lock = threading.Lock()
        self.requests = 0

    def Export(self, request, context):  # noqa: N802 - the OTLP service's method name
        received = []
        for resource_spans in request.resource_spans:
            resource = {kv.key: _value(kv.value) for kv in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    received.append(ReceivedSpan(
                        service=str(resource.get("service.name", "")),
                        name=span.name,
                        kind=KINDS.get(span.kind, "UNSPECIFIED"),
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_id=span.parent_span_id.hex() or None,
                        attributes={kv.key: _value(kv.value) for kv in span.attributes},
                    ))
        with self._lock:
            self._spans.extend(received)
            self.requests += 1
        return trace_service_pb2.ExportTraceServiceResponse()

    def spans(self) -> list[ReceivedSpan]:
        with self._lock:
            return list(self._spans)

    def wait_for(self, condition: Callable[[list[ReceivedSpan]], bool], *, timeout: float) -> list[ReceivedSpan]:
        """The spans received once ``condition`` holds for them (or all of them at the timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            spans = self.spans()
            if condition(spans) or time.monotonic() > deadline:
                return spans
            time.sleep(0.2)


class OtlpTraceServer:
    """``with OtlpTraceServer() as server: ... server.endpoint, server.receiver.spans()``."""

    def __init__(self) -> None:
        self.receiver = TraceReceiver()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(self.receiver, self._server)
        self.port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> OtlpTraceServer:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=None)
