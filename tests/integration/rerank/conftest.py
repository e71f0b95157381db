"""Rerank integration fixtures: the gRPC server in-process, with a TEI double or the CPU runtime."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import msgspec
import pytest
from fake_tei_runtime import FakeTeiRuntime
from loopback_server import serve_in_thread
from ragmesh.v1 import rerank_pb2_grpc

from ragmesh_common.rpc.client import open_channel
from ragmesh_rerank.app import build_server
from ragmesh_rerank.settings import RerankSettings


@pytest.fixture
def fake_tei() -> Iterator[tuple[FakeTeiRuntime, str]]:
    runtime = FakeTeiRuntime()
    with serve_in_thread(runtime) as url:
        yield runtime, url


@pytest.fixture(scope="module")
def cpu_runtime_url() -> Iterator[str]:
    try:
        from ragmesh_runtime.app import create_app
        from ragmesh_runtime.settings import RuntimeSettings
    except ImportError as exc:
        pytest.skip(f"ragmesh_runtime is not importable here ({exc})")
    with serve_in_thread(create_app(RuntimeSettings())) as url:
        yield url


@pytest.fixture
async def start_rerank() -> AsyncIterator[Callable[..., Awaitable[rerank_pb2_grpc.RerankStub]]]:
    started = []

    async def start(url: str, **overrides: object) -> rerank_pb2_grpc.RerankStub:
        settings = msgspec.structs.replace(RerankSettings.from_env(port=0), rerank_url=url, metrics_port=0,
                                           listen="127.0.0.1:0", **overrides)
        server, reranker = build_server(settings)
        await server.start()
        channel = open_channel(f"127.0.0.1:{server.port}")
        started.append((server, reranker, channel))
        return rerank_pb2_grpc.RerankStub(channel)

    yield start
    for server, reranker, channel in started:
        await channel.close()
        await server.server.stop(0)
        await reranker.close()
