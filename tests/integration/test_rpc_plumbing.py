"""The shared gRPC plumbing: error taxonomy <-> status both ways, hidden internals, health."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh.v1 import generation_pb2, generation_pb2_grpc, rerank_pb2, rerank_pb2_grpc
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.rpc.client import open_channel, stream, unary
from ragmesh_common.rpc.server import GrpcServer


class Broken(rerank_pb2_grpc.RerankServicer, generation_pb2_grpc.GenerationServicer):
    async def Rerank(self, request, context):
        if request.query == "slow":
            await asyncio.sleep(float(request.top_n))
            return rerank_pb2.RerankResponse(model_id="slow")
        if request.query == "bad":
            raise RagmeshError(ErrorCode.QUERY_EMPTY, "query is empty", {"field": "query"})
        if request.query == "store down":
            raise ConnectionRefusedError(111, "Connect call failed ('127.0.0.1', 5432)")
        raise ValueError("secret internal detail")

    async def Generate(self, request, context):
        yield generation_pb2.GenerateEvent(token=generation_pb2.TokenDelta(text="partial"))
        if request.question == "bad":
            raise RagmeshError(ErrorCode.INDEX_VERSION_GONE, "index version is gone")
        raise RuntimeError("secret internal detail")


@pytest.fixture
async def target():
    server = GrpcServer("test", host="127.0.0.1", port=0, metrics_port=None)
    servicer = Broken()
    server.add(rerank_pb2_grpc.add_RerankServicer_to_server, servicer, "ragmesh.v1.Rerank")
    server.add(generation_pb2_grpc.add_GenerationServicer_to_server, servicer, "ragmesh.v1.Generation")
    port = await server.start()
    yield f"127.0.0.1:{port}"
    await server.server.stop(0)


async def test_domain_error_keeps_its_code_across_the_wire(target: str) -> None:
    async with open_channel(target) as channel:
        stub = rerank_pb2_grpc.RerankStub(channel)
        with pytest.raises(RagmeshError) as exc:
            await unary(stub.Rerank, rerank_pb2.RerankRequest(query="bad"), timeout=5, peer="test")
        assert exc.value.code == ErrorCode.QUERY_EMPTY and exc.value.details == {"field": "query"}
        with pytest.raises(grpc.aio.AioRpcError) as raw:
            await stub.Rerank(rerank_pb2.RerankRequest(query="bad"), timeout=5)
        assert raw.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_unexpected_error_is_internal_without_details(target: str) -> None:
    async with open_channel(target) as channel:
        stub = rerank_pb2_grpc.RerankStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as raw:
            await stub.Rerank(rerank_pb2.RerankRequest(query="x"), timeout=5)
        assert raw.value.code() == grpc.StatusCode.INTERNAL
        assert "secret" not in (raw.value.details() or "")


async def test_streaming_errors_are_mapped_too(target: str) -> None:
    async with open_channel(target) as channel:
        stub = generation_pb2_grpc.GenerationStub(channel)
        seen = []
        with pytest.raises(RagmeshError) as exc:
            async for event in stream(stub.Generate, generation_pb2.GenerateRequest(question="bad"),
                                      timeout=5, peer="test"):
                seen.append(event.token.text)
        assert seen == ["partial"] and exc.value.code == ErrorCode.INDEX_VERSION_GONE
        with pytest.raises(RagmeshError) as exc:
            async for _ in stream(stub.Generate, generation_pb2.GenerateRequest(question="x"), timeout=5, peer="t"):
                pass
        assert exc.value.code == ErrorCode.INTERNAL and "secret" not in exc.value.message


async def test_health_and_deadline(target: str) -> None:
    async with open_channel(target) as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
    async with open_channel("127.0.0.1:1") as channel:  # nothing listens there
        with pytest.raises(RagmeshError) as exc:
            await unary(rerank_pb2_grpc.RerankStub(channel).Rerank, rerank_pb2.RerankRequest(query="q"),
                        timeout=1, peer="rerank")
        assert exc.value.code in (ErrorCode.UNAVAILABLE, ErrorCode.DEADLINE_EXCEEDED)


async def test_long_quiet_call_survives_client_keepalive_pings(target: str) -> None:
    """A client pinging often (as open_channel does every 20 s) must not get a long call dropped."""
    options = [("grpc.keepalive_time_ms", 1000), ("grpc.keepalive_timeout_ms", 5000),
               ("grpc.http2.max_pings_without_data", 0)]
    async with grpc.aio.insecure_channel(target, options=options) as channel:
        reply = await rerank_pb2_grpc.RerankStub(channel).Rerank(
            rerank_pb2.RerankRequest(query="slow", top_n=6), timeout=30)
        assert reply.model_id == "slow"


async def test_an_unmapped_connection_failure_is_unavailable_not_internal(target: str) -> None:
    """A store that is down, reached by code that forgot to map it (the indexer's Status with
    PostgreSQL down was 500 INTERNAL): UNAVAILABLE, so callers answer 503 and retry."""
    async with open_channel(target) as channel:
        with pytest.raises(RagmeshError) as exc:
            await unary(rerank_pb2_grpc.RerankStub(channel).Rerank, rerank_pb2.RerankRequest(query="store down"),
                        timeout=5, peer="test")
    assert exc.value.code == ErrorCode.UNAVAILABLE and "5432" not in exc.value.message
