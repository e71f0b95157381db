"""Every indexer command goes through one client: a long call keeps traffic on its connection, and an
indexer error becomes the same exit code whichever command met it."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from ragmesh.v1 import indexer_pb2, indexer_pb2_grpc
from ragmesh_cli.indexer_client import IndexerClient, exit_code_for
from ragmesh_cli.main import main
from ragmesh_common.errors import ErrorCode, RagmeshError


class SlowIndexer(indexer_pb2_grpc.IndexerServicer):
    def __init__(self) -> None:
        self.request_ids: list[str] = []
        self.validations: list[dict[str, str]] = []  # each Validate call's metadata

    async def Validate(self, request, context):
        self.validations.append(dict(context.invocation_metadata() or ()))
        await asyncio.sleep(0.6 if request.corpus == "docs@1" else 0)
        return indexer_pb2.ValidateResponse(index_version=request.index_version, passed=True)

    async def Status(self, request, context):
        self.request_ids.append(dict(context.invocation_metadata() or ()).get("x-request-id", ""))
        await context.abort(grpc.StatusCode.NOT_FOUND, "no corpus a@1",
                            trailing_metadata=(("ragmesh-error-code", "NOT_FOUND"),))


class CountingHealth(health_pb2_grpc.HealthServicer):
    def __init__(self) -> None:
        self.checks = 0
        self.metadata: list[dict[str, str]] = []

    async def Check(self, request, context):
        self.checks += 1
        self.metadata.append(dict(context.invocation_metadata() or ()))
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


def trace_id_of(metadata: dict[str, str]) -> str:
    version, trace_id, _span_id, flags = metadata["traceparent"].split("-")
    assert version == "00" and flags == "01"  # sampled: the indexer records the calls' spans
    return trace_id


async def test_one_commands_calls_carry_its_request_id_and_one_trace(indexer) -> None:
    # The CLI sent a request id and no trace context: each call of `index ci` began a trace of its
    # own in the indexer, and no server span recorded the id, so `ragmesh trace ID` found nothing.
    addr, health = indexer
    for _ in range(2):
        async with IndexerClient(SimpleNamespace(addr=addr, timeout=30)) as client:
            for version in ("v1", "v2"):
                await client.call("Validate", indexer_pb2.ValidateRequest(corpus="fast@1", index_version=version))
    first, second, third, fourth = health.indexer.validations
    assert len(first["x-request-id"]) == 32
    assert first["x-request-id"] == second["x-request-id"] and trace_id_of(first) == trace_id_of(second)
    # The next command: a request id and a trace of its own.
    assert third["x-request-id"] == fourth["x-request-id"] != first["x-request-id"]
    assert trace_id_of(third) == trace_id_of(fourth) != trace_id_of(first)


def test_the_callers_request_id_wins_over_the_one_the_cli_makes(indexer, capsys) -> None:
    addr, health = indexer
    code = main(["index", "status", "--corpus", "a@1", "--addr", addr, "--request-id", "ops-ticket-42"])
    said = capsys.readouterr().err
    assert code == 2 and health.indexer.request_ids == ["ops-ticket-42"]
    assert said.strip() == "ragmesh: NOT_FOUND: no corpus a@1 (request id ops-ticket-42, in the indexer's log)"


@pytest.mark.parametrize("bad", ["-leading-dash", "has space", "x" * 129])
def test_a_malformed_request_id_is_refused_before_any_call(indexer, capsys, bad: str) -> None:
    addr, health = indexer
    code = main(["index", "status", "--corpus", "a@1", "--addr", addr, f"--request-id={bad}"])
    said = capsys.readouterr().err
    assert code == 2 and health.indexer.request_ids == [] and health.checks == 0
    assert said.count("\n") == 1 and "--request-id" in said and "Traceback" not in said, said


def test_keepalive_health_checks_stay_out_of_the_commands_trace(indexer, monkeypatch, capsys) -> None:
    # They run every TRAFFIC_EVERY_S for as long as a call does: in the command's trace, a long
    # validation's few spans would sit among hundreds of health checks.
    addr, health = indexer
    monkeypatch.setattr("ragmesh_cli.indexer_client.TRAFFIC_EVERY_S", 0.1)
    code = main(["index", "validate", "--corpus", "docs@1", "--index-version", "v2", "--addr", addr,
                 "--request-id", "ci-run-7"])
    assert code == 0 and health.checks >= 2
    (validation,) = health.indexer.validations
    assert validation["x-request-id"] == "ci-run-7" and trace_id_of(validation)
    assert all("x-request-id" not in m and "traceparent" not in m for m in health.metadata), health.metadata
