"""Generation integration fixtures: the gRPC server in-process, and a runtime behind it (a
scripted OpenAI-compatible double, or the real CPU runtime when its package is importable)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import msgspec
import pytest
from fake_openai_runtime import FakeOpenAiRuntime
from loopback_server import serve_in_thread
from ragmesh.v1 import generation_pb2_grpc

from ragmesh_common.rpc.client import open_channel
from ragmesh_generation.app import build_server
from ragmesh_generation.settings import GenerationSettings


@pytest.fixture
def fake_llm() -> Iterator[tuple[FakeOpenAiRuntime, str]]:
    runtime = FakeOpenAiRuntime()
    with serve_in_thread(runtime) as base:
        yield runtime, f"{base}/v1"


@pytest.fixture(scope="module")
def cpu_runtime_url() -> Iterator[str]:
    """The real CPU runtime (extractive generator, MiniLM reranker), in a thread."""
    try:
        from ragmesh_runtime.app import create_app
        from ragmesh_runtime.settings import RuntimeSettings
    except ImportError as exc:
        pytest.skip(f"ragmesh_runtime is not importable here ({exc})")
    with serve_in_thread(create_app(RuntimeSettings())) as url:
        yield url


GenerationStarter = Callable[..., Awaitable[generation_pb2_grpc.GenerationStub]]


@pytest.fixture
async def start_generation() -> AsyncIterator[GenerationStarter]:
    started = []

    async def start(llm_url: str, **overrides: object) -> generation_pb2_grpc.GenerationStub:
        settings = msgspec.structs.replace(
            GenerationSettings(listen="127.0.0.1:0", metrics_port=0, llm_url=llm_url), **overrides)
        server, model = build_server(settings)
        await server.start()
        channel = open_channel(f"127.0.0.1:{server.port}")
        started.append((server, model, channel))
        return generation_pb2_grpc.GenerationStub(channel)

    yield start
    for server, model, channel in started:
        await channel.close()
        await server.server.stop(0)
        await model.close()
