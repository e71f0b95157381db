"""A grpc.aio server with health, reflection, error mapping, tracing, metrics and clean SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from typing import Any, Awaitable, Callable, Iterable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_server_interceptor
from prometheus_client import start_http_server

from ragmesh_common import metrics
from ragmesh_common.errors import RagmeshError
from ragmesh_common.rpc.errors import grpc_status, trailing_metadata
from ragmesh_common.rpc.health_names import MODEL_HEALTH_PREFIX
from ragmesh_common.telemetry import record_request_id, request_id_var

log = logging.getLogger("ragmesh.rpc")


class ErrorMappingInterceptor(grpc.aio.ServerInterceptor):
    """Maps RagmeshError to its gRPC status (+ code in trailing metadata); hides unexpected errors.

    Also records per-method metrics and binds the caller's request id to the logging context; with
    ``request_id_on_span`` also to the call's server span (see GrpcServer).
    """

    def __init__(self, service: str, *, request_id_on_span: bool = False) -> None:
        self.service = service
        self.request_id_on_span = request_id_on_span

    async def intercept_service(self, continuation, handler_call_details):  # type: ignore[override]
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        method = handler_call_details.method.rsplit("/", 1)[-1]
        request_id = dict(handler_call_details.invocation_metadata or ()).get("x-request-id", "")
        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                self._wrap_unary(handler.unary_unary, method, request_id),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                self._wrap_stream(handler.unary_stream, method, request_id),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler

    def _wrap_unary(self, behavior, method: str, request_id: str):
        async def wrapper(request, context):
            async with self._call(context, method, request_id):
                return await behavior(request, context)

        return wrapper

    def _wrap_stream(self, behavior, method: str, request_id: str):
        async def wrapper(request, context):
            async with self._call(context, method, request_id):
                async for item in behavior(request, context):
                    yield item

        return wrapper

    @contextlib.asynccontextmanager
    async def _call(self, context, method: str, request_id: str):
        """One handled call: request id bound, errors mapped to status, metrics recorded."""
        # Each call runs in its own task, so setting the id needs no reset (a reset would fail
        # when a streaming handler is closed from another context after a client cancel).
        request_id_var.set(request_id)
        if self.request_id_on_span:
            record_request_id(trace.get_current_span(), request_id)  # the tracing interceptor's span
        start = time.perf_counter()
        code = "OK"
        try:
            yield
        except RagmeshError as exc:
            code = exc.code.value
            await context.abort(grpc_status(exc), exc.message, trailing_metadata=trailing_metadata(exc))
        except (asyncio.CancelledError, grpc.aio.AbortError, GeneratorExit):
            code = "CANCELLED"
            raise
        except (ConnectionError, TimeoutError) as exc:
            # A store or upstream that is down, reached by code that did not say so itself: still
            # an outage (UNAVAILABLE, retry later), never an INTERNAL error.
            code = "UNAVAILABLE"
            log.warning("dependency unreachable in %s: %s", method, type(exc).__name__)
            await context.abort(grpc.StatusCode.UNAVAILABLE, "a dependency is unavailable",
                                trailing_metadata=(("ragmesh-error-code", "UNAVAILABLE"),))
        except Exception:
            code = "INTERNAL"
            log.exception("unhandled error in %s", method)
            await context.abort(grpc.StatusCode.INTERNAL, "internal error",
                                trailing_metadata=(("ragmesh-error-code", "INTERNAL"),))
        finally:
            self._observe(method, code, start)

    def _observe(self, method: str, code: str, start: float) -> None:
        metrics.GRPC_SERVER_REQUESTS.labels(self.service, method, code).inc()
        metrics.GRPC_SERVER_DURATION.labels(self.service, method).observe(time.perf_counter() - start)


_PROBE_TIMEOUT_S = 1.5


class DependencyHealthServicer(health.aio.HealthServicer):
    """Standard gRPC health, plus the model runtime each service depends on: a Check of
    ``ragmesh.model.<name>`` asks that dependency now (its own health endpoint, bounded in time),
    so a caller learns that rerank serves but its model runtime does not."""

    def __init__(self) -> None:
        super().__init__()
        self._probes: dict[str, Callable[[], Awaitable[bool]]] = {}

    def watch(self, name: str, probe: Callable[[], Awaitable[bool]]) -> str:
        service = MODEL_HEALTH_PREFIX + name
        self._probes[service] = probe
        return service

    async def Check(self, request, context):  # noqa: N802 - gRPC method name
        probe = self._probes.get(request.service)
        if probe is None:
            return await super().Check(request, context)
        try:
            ok = await asyncio.wait_for(probe(), _PROBE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - any failure of the dependency means "not serving"
            ok = False
        status = health_pb2.HealthCheckResponse.SERVING if ok else health_pb2.HealthCheckResponse.NOT_SERVING
        return health_pb2.HealthCheckResponse(status=status)


class GrpcServer:
    """Owns one grpc.aio server: registration, health, reflection, metrics port, shutdown."""

    def __init__(self, service: str, *, host: str, port: int, metrics_port: int | None,
                 request_id_on_spans: bool = False) -> None:
        """``request_id_on_spans``: each call's server span carries the caller's request id
        (``ragmesh.request_id``), for a service that requests enter the mesh at without passing the
        gateway (the indexer, called by the CLI's indexer commands). Off elsewhere: a request there
        comes through the gateway, whose server span (the trace's root) carries it, and only that
        one (tests/e2e/test_otlp_traces.py counts it)."""
        self.service = service
        self.host = host
        self.port = port
        self.metrics_port = metrics_port
        self.server = grpc.aio.server(
            interceptors=[aio_server_interceptor(),
                          ErrorMappingInterceptor(service, request_id_on_span=request_id_on_spans)],
            options=[("grpc.max_receive_message_length", 64 * 1024 * 1024),
                     ("grpc.max_send_message_length", 64 * 1024 * 1024),
                     # Clients ping every 20 s (rpc.client); the server default (5 min) counts those
                     # as strikes and drops long, quiet calls (an index build) with too_many_pings.
                     ("grpc.http2.min_recv_ping_interval_without_data_ms", 10_000),
                     ("grpc.keepalive_permit_without_calls", 1),
                     ("grpc.http2.max_ping_strikes", 0),
                     # gRPC shares a port with any earlier listener by default (SO_REUSEPORT): a
                     # stale server would then keep answering half the calls. Refuse the port instead.
                     ("grpc.so_reuseport", 0)],
        )
        self.health = DependencyHealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self._service_names: list[str] = [health.SERVICE_NAME, reflection.SERVICE_NAME]
        self._stopping = asyncio.Event()

    def add(self, register: Callable[[Any, grpc.aio.Server], None], servicer: Any, full_name: str) -> None:
        register(servicer, self.server)
        self._service_names.append(full_name)

    def watch_model(self, name: str, probe: Callable[[], Awaitable[bool]]) -> None:
        """Report the model dependency ``name`` (embedding, rerank, generation) in gRPC health."""
        self.health.watch(name, probe)

    async def start(self) -> int:
        reflection.enable_server_reflection(self._service_names, self.server)
        bound = self.server.add_insecure_port(f"{self.host}:{self.port}")
        if bound == 0:
            raise SystemExit(f"ragmesh-{self.service}: cannot bind {self.host}:{self.port}")
        self.port = bound
        if self.metrics_port is not None:
            start_http_server(self.metrics_port, addr=self.host)
        await self.server.start()
        for name in self._service_names + [""]:
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        log.info("serving", extra={"fields": {"port": self.port, "metrics_port": self.metrics_port}})
        return bound

    def install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopping.set)

    async def wait_and_stop(self, grace: float = 5.0, on_stop: Iterable[Callable[[], Awaitable[None]]] = ()) -> None:
        await self._stopping.wait()
        log.info("stopping")
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)
        for hook in on_stop:
            await hook()

    def request_stop(self) -> None:
        self._stopping.set()
