"""Downstream readiness through the standard gRPC health service."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh_gateway.health.ports import DependencyProbe
from ragmesh_gateway.upstream.channels import Channels


class GrpcHealthProbe(DependencyProbe):
    def __init__(self, channels: Channels, peer: str, *, timeout_s: float) -> None:
        self.name = peer
        self._channels = channels
        self._timeout_s = timeout_s

    async def is_serving(self) -> bool:
        stub = health_pb2_grpc.HealthStub(self._channels.get(self.name))
        try:
            reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=self._timeout_s)
        except grpc.aio.AioRpcError:
            return False
        return reply.status == health_pb2.HealthCheckResponse.SERVING
