"""The one client of the indexer's gRPC API, for every command that talks to it (`ragmesh index`,
`ragmesh corpus`, and `ragmesh up --corpus`).

None of them imports the indexer (the CLI is a lib). A call that runs for minutes keeps traffic on
the connection (see :meth:`IndexerClient.call`). While a Build runs, the client polls the Status RPC
and draws its progress on stderr: a redrawn bar when stderr is a terminal, else one line per stage
and every PROGRESS_LINE_EVERY_S seconds. stdout carries only the contract JSON.

The indexer's address comes from --addr, $RAGMESH_INDEXER_ADDR, the record of the mesh serving from
the state folder, or the default port (ragmesh_cli.addresses). Each command's calls carry one request
id (gRPC metadata ``x-request-id``: the caller's ``--request-id``, else a fresh one) and one trace
(``traceparent``); the indexer binds the id to its log lines and records it on its server spans, so
`ragmesh trace ID` shows the command's calls. An error names the id and the address that was tried.
Progress polls and keepalive health checks go without either: they would bury the command's calls
in its trace (two a second for as long as a build runs).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import os
import sys
import time
import uuid
from typing import Any, TextIO

from ragmesh_cli.addresses import Address, add_state_option, resolve
from ragmesh_cli.output import EXIT_FAIL, EXIT_UNAVAILABLE, EXIT_USAGE, err

POLL_INTERVAL_S = 0.5
TRAFFIC_EVERY_S = 10.0
PROGRESS_LINE_EVERY_S = 10.0
DEFAULT_ADDR = "127.0.0.1:50054"
# The call ran and its work failed (a build that failed, gates that did not pass): like a failed gate.
_FAILED_CODES = {"BUILD_FAILED", "VALIDATION_FAILED", "CANCELLED"}
_UNAVAILABLE_CODES = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RUNTIME_ERROR"}


def add_indexer_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--addr", default="", help="indexer gRPC address (default $RAGMESH_INDEXER_ADDR, else the mesh "
                                              f"serving from the state folder, else {DEFAULT_ADDR})")
    add_state_option(p)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for the indexer (default 1800)")
    p.add_argument("--request-id", default="", help="the request id the command's calls carry (default: a fresh "
                                                   "one); `ragmesh trace ID` shows them")


def corpus_command(sub: argparse._SubParsersAction, name: str, helptext: str, func, *options: tuple[str, dict]):
    """A subcommand on one corpus: ``--corpus``, then ``options`` (flag, add_argument keywords), then
    the indexer's address and timeout."""
    p = sub.add_parser(name, help=helptext)
    p.add_argument("--corpus", required=True, help="corpus id (library@version)")
    for flag, keywords in options:
        p.add_argument(flag, **keywords)
    add_indexer_options(p)
    p.set_defaults(func=func)
    return p


def exit_code_for(error) -> int:
    """A RagmeshError from the indexer as an exit code: 5 unavailable, 1 the work failed, 2 the
    request was refused (an unknown corpus, a root outside the allowed folders, a conflict)."""
    code = error.code.value
    if code in _UNAVAILABLE_CODES:
        return EXIT_UNAVAILABLE
    if code in _FAILED_CODES or error.http_status >= 500:
        return EXIT_FAIL
    return EXIT_USAGE


def indexer_address(args) -> Address:
    return resolve(args, "indexer", flag="--addr", flag_value=getattr(args, "addr", ""), env="RAGMESH_INDEXER_ADDR",
                   default=DEFAULT_ADDR)


class IndexerFailed(Exception):
    def __init__(self, exit_code: int) -> None:
        self.exit_code = exit_code


class ProgressView:
    """Draws build progress on ``stream``; never touches stdout."""

    def __init__(self, stream: TextIO, *, label: str, tty: bool | None = None) -> None:
        self.stream = stream
        self.label = label
        self.tty = stream.isatty() if tty is None else tty
        self.started = time.monotonic()
        self._last: tuple[str, int, int] | None = None
        self._last_line_at = 0.0
        self._drawn = False
        # (stage, when it was first seen, its count then): the stage's own rate, not the build's.
        self._stage_start: tuple[str, float, int] = ("", 0.0, 0)

    def show(self, stage: str, done: int, total: int, *, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if stage != self._stage_start[0]:
            self._stage_start = (stage, now, done)
        rate = self.rate(done, now)
        if self.tty:
            self.stream.write("\r\033[K" + self.render(stage, done, total, now - self.started, rate))
            self._drawn = True
        elif (self._last is None or stage != self._last[0]
              or now - self._last_line_at >= PROGRESS_LINE_EVERY_S and (stage, done, total) != self._last):
            self.stream.write(f"ragmesh: {self.render(stage, done, total, now - self.started, rate)}\n")
            self._last_line_at = now
        self._last = (stage, done, total)
        self.stream.flush()

    def rate(self, done: int, now: float) -> float:
        """Items per second in the current stage, once it has run a second; 0 before that."""
        _, since, done_then = self._stage_start
        return (done - done_then) / (now - since) if now - since >= 1.0 and done > done_then else 0.0

    def render(self, stage: str, done: int, total: int, elapsed: float, rate: float = 0.0) -> str:
        # Embedding is the long stage of a build (chunks per second decide its length): its rate and
        # the time left are shown once known.
        speed = ""
        if rate > 0 and stage == "embed":
            speed = f" {rate:.1f} chunks/s"
            if total > done:
                speed += f" ETA {(total - done) / rate:.0f}s"
        if total > 0:
            share = min(1.0, done / total)
            bar = "#" * int(share * 30)
            return f"{self.label} {stage:<6} [{bar:<30}] {done}/{total} {share:4.0%} {elapsed:5.0f}s{speed}"
        return f"{self.label} {stage:<6} {done} {elapsed:5.0f}s{speed}"

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()


class IndexerClient:
    """One channel to the indexer for the whole command; every call has a deadline."""

    def __init__(self, args) -> None:
        self.address = indexer_address(args)
        self.addr = self.address.value
        self.timeout = args.timeout
        self.request_id = command_request_id(args)
        self._scope = contextlib.ExitStack()

    async def __aenter__(self) -> IndexerClient:
        from ragmesh.v1 import indexer_pb2_grpc
        from ragmesh_common.rpc.client import open_channel
        from ragmesh_common.telemetry import outgoing_request

        # The request id and the trace go with every call made inside (the gRPC client interceptor
        # and ragmesh_common.rpc.client.call_metadata), as a gateway's calls carry the request's.
        self._scope.enter_context(outgoing_request(self.request_id))
        self._channel = open_channel(self.addr)
        self.stub = indexer_pb2_grpc.IndexerStub(self._channel)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        try:
            await self._channel.close()
        finally:
            self._scope.close()

    async def call(self, method: str, request, *, timeout: float | None = None):
        from ragmesh_common.errors import RagmeshError
        from ragmesh_common.rpc.client import unary

        job = asyncio.create_task(unary(getattr(self.stub, method), request, timeout=timeout or self.timeout,
                                        peer="indexer"))
        try:
            # A call that runs for minutes (validating a large corpus) must keep traffic on the
            # connection: the channel's keepalive pings alone, with no data in between, make the
            # server answer GOAWAY "too_many_pings" after ~90 s and the call fails UNAVAILABLE.
            while not job.done():
                await asyncio.wait({job}, timeout=TRAFFIC_EVERY_S)
                if not job.done():
                    await self._health()
            return job.result()
        except RagmeshError as exc:
            where = f"indexer at {self.address}; " if exc.code.value in _UNAVAILABLE_CODES else ""
            err(f"{exc.code.value}: {exc.message} ({where}request id {self.request_id}, in the indexer's log)")
            raise IndexerFailed(exit_code_for(exc)) from None
        finally:
            if not job.done():
                job.cancel()

    async def _health(self) -> None:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        try:
            await outside_the_request(lambda: health_pb2_grpc.HealthStub(self._channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=5))
        except Exception:  # noqa: BLE001 - only traffic; the call itself reports a dead indexer
            pass

    async def build(self, request, *, label: str, stream: TextIO | None = None):
        """Build, drawing the Status RPC's progress of this build until the reply arrives."""
        from ragmesh.v1 import indexer_pb2

        stream = stream or sys.stderr
        status_request = indexer_pb2.StatusRequest(corpus=request.corpus.corpus)
        earlier = {p.index_version for p in await self._progress(status_request) if p.index_version}
        view = ProgressView(stream, label=label)
        job = asyncio.create_task(self.call("Build", request))
        try:
            while not job.done():
                await asyncio.wait({job}, timeout=POLL_INTERVAL_S)
                if job.done():
                    break
                ours = [p for p in await self._progress(status_request) if p.index_version not in earlier]
                if ours:
                    view.show(ours[0].stage, ours[0].done, ours[0].total)
            return job.result()
        finally:
            if not job.done():
                job.cancel()
            view.close()

    async def _progress(self, request) -> list:
        from ragmesh_common.errors import RagmeshError
        from ragmesh_common.rpc.client import unary

        try:  # progress is a courtesy: a failed poll must not fail the build
            reply = await outside_the_request(
                lambda: unary(self.stub.Status, request, timeout=5, peer="indexer"))
        except RagmeshError:
            return []
        return list(reply.in_progress)


def command_request_id(args) -> str:
    """The caller's own ``--request-id`` wins over one the CLI makes (as a caller's X-Request-ID does
    on the gateway's path, ragmesh_cli.gateway_client.new_request_id). A malformed one is refused:
    the indexer would neither log it nor record it on a span."""
    from ragmesh_common.telemetry import well_formed_request_id

    given = getattr(args, "request_id", "") or ""
    if not given:
        return uuid.uuid4().hex
    if not well_formed_request_id(given):
        err(f"--request-id {given!r} is not a request id (letters, digits and ._:-, at most 128 characters, "
            "starting with a letter or digit)")
        raise IndexerFailed(EXIT_USAGE)
    return given


async def outside_the_request(make_call):
    """Make and await the call ``make_call()`` with neither the command's request id nor its trace
    (the call is made inside: a gRPC call takes its metadata from the context it is made in)."""
    async def clean():
        return await make_call()

    return await asyncio.create_task(clean(), context=contextvars.Context())


def run(coro) -> int:
    """Run one command's coroutine; an indexer error ends it with its exit code (said on stderr)."""
    try:
        return asyncio.run(coro)
    except IndexerFailed as failed:
        return failed.exit_code


def call(args, method: str, request) -> Any:
    """One call on its own channel, for the commands that make a single call. An error raises
    IndexerFailed, which `ragmesh`'s main turns into the exit code."""
    async def one() -> Any:
        async with IndexerClient(args) as indexer:
            return await indexer.call(method, request)

    return asyncio.run(one())


def pb_json(message) -> dict:
    """A reply as the CLI's contract JSON: counts as numbers and every field present, a zero or an
    empty list included (protobuf's JSON mapping would write int64 as strings and leave them out)."""
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True,
                         unquote_int64_if_possible=True)


def actor() -> str:
    return os.environ.get("RAGMESH_ACTOR") or os.environ.get("USER") or "cli"
