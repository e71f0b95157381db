"""gRPC client channels: tracing, request-id propagation, deadlines on every call, error mapping."""

from __future__ import annotations

from typing import Any, AsyncIterator, Callable, TypeVar

import grpc
from opentelemetry.instrumentation.grpc import aio_client_interceptors

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.rpc.errors import from_rpc_error
from ragmesh_common.telemetry import request_id_var

T = TypeVar("T")


def open_channel(target: str) -> grpc.aio.Channel:
    return grpc.aio.insecure_channel(
        target,
        interceptors=aio_client_interceptors(),
        options=[
            ("grpc.max_receive_message_length", 64 * 1024 * 1024),
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            ("grpc.keepalive_time_ms", 30_000),
            ("grpc.enable_retries", 0),
        ],
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
