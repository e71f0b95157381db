"""The CLI's build progress: polled from the Status RPC while Build runs, drawn on stderr only —
a redrawn bar on a terminal, plain lines otherwise. A fake indexer answers over real gRPC."""

from __future__ import annotations

import asyncio
import io
from types import SimpleNamespace

import grpc
import pytest
from ragmesh.v1 import indexer_pb2, indexer_pb2_grpc

from ragmesh_cli.indexer_client import IndexerClient, ProgressView

STAGES = [("", "scan", 2, 4), ("v1", "embed", 10, 40), ("v1", "embed", 40, 40), ("v1", "upsert", 40, 40)]


class SlowIndexer(indexer_pb2_grpc.IndexerServicer):
    """Build answers only once Status has reported every stage; an older build is in progress too."""

    def __init__(self) -> None:
        self.polls = 0
        self.all_seen = asyncio.Event()

    async def Status(self, request, context):
        stale = indexer_pb2.BuildProgress(index_version="v0-stale", stage="embed", done=1, total=9)
        if self.polls == 0:  # the CLI's snapshot before Build starts
            self.polls += 1
            return indexer_pb2.StatusResponse(corpus=request.corpus, in_progress=[stale])
        version, stage, done, total = STAGES[min(self.polls - 1, len(STAGES) - 1)]
        self.polls += 1
        if self.polls > len(STAGES):
            self.all_seen.set()
        return indexer_pb2.StatusResponse(corpus=request.corpus, in_progress=[
            indexer_pb2.BuildProgress(index_version=version, stage=stage, done=done, total=total), stale])

    async def Build(self, request, context):
        await asyncio.wait_for(self.all_seen.wait(), timeout=30)
        return indexer_pb2.BuildResponse(index_version="v1", chunks=40, state="candidate")


@pytest.fixture
async def fake_indexer():
    server = grpc.aio.server()
    servicer = SlowIndexer()
    indexer_pb2_grpc.add_IndexerServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    yield f"127.0.0.1:{port}"
    await server.stop(None)


async def test_build_draws_this_builds_progress_until_the_reply(fake_indexer, monkeypatch) -> None:
    monkeypatch.setattr("ragmesh_cli.indexer_client.POLL_INTERVAL_S", 0.01)
    monkeypatch.setattr("ragmesh_cli.indexer_client.PROGRESS_LINE_EVERY_S", 0.0)
    stream = io.StringIO()
    request = indexer_pb2.BuildRequest(corpus=indexer_pb2.CorpusSpec(corpus="lib@1"))
    async with IndexerClient(SimpleNamespace(addr=fake_indexer, timeout=30)) as client:
        reply = await client.build(request, label="lib@1", stream=stream)
    assert reply.index_version == "v1"
    lines = stream.getvalue().splitlines()
    assert lines[0].startswith("ragmesh: lib@1 scan ") and "2/4" in lines[0]
    assert any("embed" in line and "10/40" in line for line in lines)
    assert any("upsert" in line and "40/40" in line for line in lines)
    assert not any("1/9" in line for line in lines)  # the stale build is not ours
    assert "\r" not in stream.getvalue()


def test_terminal_bar_is_redrawn_in_place_and_cleared() -> None:
    stream = io.StringIO()
    view = ProgressView(stream, label="lib@1", tty=True)
    view.show("embed", 15, 60)
    view.show("embed", 30, 60)
    view.close()
    text = stream.getvalue()
    assert text.count("\r\033[K") == 3 and "\n" not in text
    assert "[#######" in text and "15/60" in text and "30/60  50%" in text


def test_plain_lines_only_on_a_new_stage_or_after_a_while() -> None:
    stream = io.StringIO()
    view = ProgressView(stream, label="lib@1", tty=False)
    view.show("scan", 1, 10)
    view.show("scan", 2, 10)  # same stage, too soon: no new line
    view.show("embed", 0, 30)
    view.close()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2 and "scan" in lines[0] and "embed" in lines[1]
    assert view.render("scan", 3, 0, 1.0).startswith("lib@1 scan   3")  # total unknown: a count


def test_the_embed_stage_shows_its_rate_and_the_time_left() -> None:
    stream = io.StringIO()
    view = ProgressView(stream, label="lib@1", tty=True)
    start = view.started
    view.show("scan", 10, 10, now=start + 1)
    view.show("embed", 0, 300, now=start + 2)
    view.show("embed", 20, 300, now=start + 2.5)  # under a second in the stage: no rate yet
    assert "chunks/s" not in stream.getvalue()
    view.show("embed", 100, 300, now=start + 6)  # 100 chunks in the 4 s since embedding began
    last = stream.getvalue().rsplit("\r\033[K", 1)[-1]
    assert last.endswith(" 25.0 chunks/s ETA 8s") and "100/300" in last
    view.show("upsert", 100, 300, now=start + 7)
    assert "chunks/s" not in stream.getvalue().rsplit("\r\033[K", 1)[-1]
