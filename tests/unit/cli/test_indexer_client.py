"""Every indexer command goes through one client: a long call keeps traffic on its connection, and an
indexer error becomes the same exit code whichever command met it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh.v1 import indexer_pb2, indexer_pb2_grpc
from ragmesh_cli.indexer_client import exit_code_for
from ragmesh_cli.main import main
from ragmesh_common.errors import ErrorCode, RagmeshError


class SlowIndexer(indexer_pb2_grpc.IndexerServicer):
    def __init__(self) -> None:
        self.request_ids: list[str] = []

    async def Validate(self, request, context):
        await asyncio.sleep(0.6)
        return indexer_pb2.ValidateResponse(index_version=request.index_version, passed=True)

    async def Status(self, request, context):
        self.request_ids.append(dict(context.invocation_metadata() or ()).get("x-request-id", ""))
        await context.abort(grpc.StatusCode.NOT_FOUND, "no corpus a@1",
                            trailing_metadata=(("ragmesh-error-code", "NOT_FOUND"),))


class CountingHealth(health_pb2_grpc.HealthServicer):
    def __init__(self) -> None:
        self.checks = 0

    async def Check(self, request, context):
        self.checks += 1
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.SERVING)


@pytest.fixture
def indexer() -> Iterator[tuple[str, CountingHealth]]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    health = CountingHealth()
    servicer = SlowIndexer()

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        indexer_pb2_grpc.add_IndexerServicer_to_server(servicer, server)
        health_pb2_grpc.add_HealthServicer_to_server(health, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    try:
        health.indexer = servicer
        yield f"127.0.0.1:{port}", health
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(None), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_a_long_validate_keeps_traffic_on_its_connection(indexer, monkeypatch, capsys) -> None:
    # Keepalive pings alone, with no data in between, make the server answer GOAWAY after ~90 s;
    # `index validate` of a large corpus runs longer than that.
    addr, health = indexer
    monkeypatch.setattr("ragmesh_cli.indexer_client.TRAFFIC_EVERY_S", 0.1)
    code = main(["index", "validate", "--corpus", "docs@1", "--index-version", "v2", "--addr", addr])
    assert code == 0 and '"passed": true' in capsys.readouterr().out
    assert health.checks >= 2


@pytest.mark.parametrize(("code", "exit_code"), [
    (ErrorCode.UNAVAILABLE, 5), (ErrorCode.DEADLINE_EXCEEDED, 5), (ErrorCode.RUNTIME_ERROR, 5),
    (ErrorCode.BUILD_FAILED, 1), (ErrorCode.VALIDATION_FAILED, 1), (ErrorCode.INTERNAL, 1),
    (ErrorCode.NOT_FOUND, 2), (ErrorCode.INVALID_ARGUMENT, 2), (ErrorCode.CONFLICT, 2),
    (ErrorCode.ROOT_NOT_ALLOWED, 2), (ErrorCode.INDEX_VERSION_GONE, 2),
])
def test_an_indexer_error_is_one_exit_code_for_every_command(code: ErrorCode, exit_code: int) -> None:
    assert exit_code_for(RagmeshError(code, "x")) == exit_code


def test_an_unreachable_indexer_exits_5_without_a_traceback(capsys) -> None:
    code = main(["index", "status", "--corpus", "docs@1", "--addr", "127.0.0.1:9", "--timeout", "2"])
    assert code == 5
    assert "Traceback" not in capsys.readouterr().err


def test_an_indexer_error_names_the_request_id_the_indexer_was_sent(indexer, capsys) -> None:
    # main printed `NOT_FOUND: no corpus a@1` and sent no request id: the indexer's log line of the
    # refusal could not be found from what the user saw.
    addr, health = indexer
    code = main(["index", "status", "--corpus", "a@1", "--addr", addr])
    said = capsys.readouterr().err
    (sent,) = health.indexer.request_ids
    assert code == 2 and len(sent) == 32
    assert said.strip() == f"ragmesh: NOT_FOUND: no corpus a@1 (request id {sent}, in the indexer's log)"


def test_an_unreachable_indexer_is_named_with_how_its_address_was_chosen(capsys, monkeypatch) -> None:
    # main said `UNAVAILABLE: indexer failed: UNAVAILABLE`, naming no address.
    monkeypatch.setenv("RAGMESH_INDEXER_ADDR", "127.0.0.1:9")
    code = main(["index", "status", "--corpus", "docs@1", "--timeout", "2"])
    said = capsys.readouterr().err
    assert code == 5 and "indexer at 127.0.0.1:9 ($RAGMESH_INDEXER_ADDR)" in said, said
