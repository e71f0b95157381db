"""gRPC client channels: tracing, request-id propagation, deadlines on every call, error mapping.

Reconnects: gRPC's default backoff between connection attempts grows from 1 s to 120 s, so after a
long outage a service that is back again went unused for tens of seconds (17 s after a 60 s
outage). Here attempts start 100 ms apart and never drift further than 1 s apart, so a returning
service is used within about a second. Keepalive pings (every 20 s, also when idle) find a peer
that vanished without closing its connections (a host gone, a dropped network) within 25 s.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable, TypeVar

import grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.rpc.errors import from_rpc_error
from ragmesh_common.telemetry import request_id_var

T = TypeVar("T")


CHANNEL_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1_000),
    # The server side accepts these (rpc.server: min_recv_ping_interval_without_data_ms, no strikes).
    ("grpc.keepalive_time_ms", 20_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.enable_retries", 0),
]


def open_channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(
        target,
        interceptors=aio_client_interceptors(),
        options=CHANNEL_OPTIONS,
    )


def call_metadata() -> tuple[tuple[str, str], ...]:
    rid = request_id_var.get()
    return (("x-request-id", rid),) if rid else ()


async def unary(method: Callable[..., Any], request: Any, *, timeout: float, peer: str) -> Any:
    """One unary call with a deadline; failures come back as RagmeshError."""
    try:
        return await method(request, timeout=timeout, metadata=call_metadata())
    except grpc.aio.AioRpcError as exc:
        raise from_rpc_error(exc, peer=peer) from None


async def stream(method: Callable[..., Any], request: Any, *, timeout: float, peer: str) -> AsyncIterator[Any]:
    """A server-streaming call with a deadline; cancelled when the consumer stops iterating."""
    call = method(request, timeout=timeout, metadata=call_metadata())
    try:
        async for item in call:
            yield item
    except grpc.aio.AioRpcError as exc:
        raise from_rpc_error(exc, peer=peer) from None
    finally:
        call.cancel()


def unavailable(peer: str) -> RagmeshError:
    return RagmeshError(ErrorCode.UNAVAILABLE, f"{peer} is unavailable")
