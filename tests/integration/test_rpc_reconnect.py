"""A service that comes back is used again within about two seconds (issue 12, defect 2).

gRPC's default reconnect backoff grows to two minutes: after generation came back, chats kept
failing UNAVAILABLE for 17 s (60 s outage) to 37.6 s (151 s outage). ragmesh's channels cap the
backoff at one second, so however long the outage, the first attempt after the return comes soon.
"""

from __future__ import annotations

import asyncio
import time

from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh_common.rpc.client import open_channel
from ragmesh_common.rpc.server import GrpcServer

OUTAGE_S = 12.0  # long enough for the default backoff to be several seconds between attempts


async def start(port: int) -> GrpcServer:
    server = GrpcServer("returning", host="127.0.0.1", port=port, metrics_port=None)
    await server.start()
    return server


async def serving(stub) -> bool:
    try:
        reply = await stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=0.5)
    except Exception:  # noqa: BLE001 - any failure means "not yet"
        return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


async def test_a_returning_service_is_used_within_two_seconds(free_port) -> None:
    port = free_port()
    server = await start(port)
    async with open_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        assert await serving(stub)
        await server.server.stop(None)
        # Callers keep trying during the outage, as traffic would.
        outage_ends = time.monotonic() + OUTAGE_S
        while time.monotonic() < outage_ends:
            assert not await serving(stub)
            await asyncio.sleep(0.25)
        server = await start(port)
        back_at = time.monotonic()
        try:
            while not await serving(stub):
                await asyncio.sleep(0.05)
                assert time.monotonic() - back_at < 10, "not used again within 10 s"
            recovered_s = time.monotonic() - back_at
        finally:
            await server.server.stop(None)
    assert recovered_s < 2.5, f"used again only {recovered_s:.1f}s after it came back"
