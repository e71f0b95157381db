"""Each service reports the model runtime behind it in gRPC health (``ragmesh.model.<name>``), so
the gateway's /health/ready can say what a runtime outage means (issue 12, defect 6: it answered
200 "ready" while the runtime was down and every chat failed)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import msgspec
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh_common.rpc.client import open_channel


class _Runtime(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path == "/health":
            body = b""
        elif self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model", "created": 0,
                                                          "owned_by": "test"}]}).encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


class StubRuntime:
    """Answers /health and /v1/models while up; ``stop`` makes it vanish (connection refused)."""

    def __init__(self) -> None:
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Runtime)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def runtime():
    stub = StubRuntime()
    yield stub
    stub.stop()


async def model_state(port: int, name: str) -> int:
    async with open_channel(f"127.0.0.1:{port}") as channel:
        reply = await health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service=f"ragmesh.model.{name}"), timeout=5)
    return reply.status


async def assert_follows_the_runtime(server, name: str, runtime: StubRuntime) -> None:
    await server.start()
    try:
        assert await model_state(server.port, name) == health_pb2.HealthCheckResponse.SERVING
        runtime.stop()
        assert await model_state(server.port, name) == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        await server.server.stop(0)


async def test_rerank_reports_its_runtime(runtime: StubRuntime) -> None:
    from ragmesh_rerank.app import build_server
    from ragmesh_rerank.settings import RerankSettings

    settings = msgspec.structs.replace(RerankSettings.from_env(port=0), rerank_url=runtime.url, metrics_port=0,
                                       listen="127.0.0.1:0")
    server, reranker = build_server(settings)
    await assert_follows_the_runtime(server, "rerank", runtime)
    await reranker.close()


async def test_generation_reports_its_runtime(runtime: StubRuntime) -> None:
    from ragmesh_generation.app import build_server
    from ragmesh_generation.settings import GenerationSettings

    server, model = build_server(GenerationSettings(listen="127.0.0.1:0", metrics_port=0, llm_url=f"{runtime.url}/v1"))
    await assert_follows_the_runtime(server, "generation", runtime)
    await model.close()


async def test_retrieval_reports_its_embedding_runtime(runtime: StubRuntime, tmp_path: Path) -> None:
    from ragmesh_retrieval.app import RetrievalApp
    from ragmesh_retrieval.domain.model import SearchLimits
    from ragmesh_retrieval.settings import RetrievalSettings

    app = RetrievalApp(RetrievalSettings(
        host="127.0.0.1", port=0, metrics_port=None, qdrant_url="", qdrant_api_key="",
        qdrant_path=str(tmp_path / "qdrant"), embed_url=runtime.url, embed_cache_entries=8, catalog_ttl_s=60.0,
        serve_vectorstore=False, limits=SearchLimits()))
    try:
        await assert_follows_the_runtime(app.server, "embedding", runtime)
    finally:
        await app.close()
