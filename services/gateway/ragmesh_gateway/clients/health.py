"""Downstream readiness through the standard gRPC health service, and the model runtimes behind
each service (``ragmesh.model.<name>``, answered by ragmesh_common.rpc.server)."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh_common.rpc.health_names import MODEL_HEALTH_PREFIX

from ragmesh_gateway.clients.channels import Channels
from ragmesh_gateway.health.ports import DependencyProbe, ModelDependency


async def _check(channels: Channels, peer: str, service: str, timeout_s: float) -> bool | None:
    stub = health_pb2_grpc.HealthStub(channels.get(peer))
    try:
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout_s)
    except grpc.aio.AioRpcError as exc:
        return None if exc.code() == grpc.StatusCode.NOT_FOUND else False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


class GrpcHealthProbe(DependencyProbe):
    def __init__(self, channels: Channels, peer: str, *, timeout_s: float) -> None:
        self.name = peer
        self._channels = channels
        self._timeout_s = timeout_s

    async def is_serving(self) -> bool:
        return bool(await _check(self._channels, self.name, "", self._timeout_s))


class GrpcModelProbe(ModelDependency):
    """``name``'s model runtime as ``peer`` reaches it (a dead peer: not serving either)."""

    def __init__(self, channels: Channels, peer: str, name: str, *, timeout_s: float) -> None:
        self.name = name
        self._peer = peer
        self._channels = channels
        self._timeout_s = timeout_s

    async def is_serving(self) -> bool | None:
        return await _check(self._channels, self._peer, MODEL_HEALTH_PREFIX + self.name, self._timeout_s)
