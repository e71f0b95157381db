"""The runtime clients never reuse a connection their server may be closing (ragmesh_common.clients).

uvicorn (the CPU runtime's server) closes a keep-alive connection idle for 5 s. httpx's pool kept
one for the same 5 s, so a request on a connection idle just under 5 s could meet the server's
close: ReadError, UNAVAILABLE, and a search flagged ``embedding`` with the runtime up (the fault
drill's stray flag); the chat client (generation -> runtime) and the indexer's pool had the same one. The server below
answers as uvicorn does, but is already closing any connection idle for more than its keep-alive
less a second when the next request arrives on it.
"""

from __future__ import annotations

import asyncio
import time

import pytest
import uvicorn

from ragmesh_common.clients.llm import ChatClient
from ragmesh_common.clients.tei import TeiClient
from ragmesh_indexer.embedding import EmbeddingRuntimes

KEEP_ALIVE_S = uvicorn.Config(app=None).timeout_keep_alive  # the runtime runs uvicorn's default


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, answered: list[float]) -> None:
    idle_since = time.monotonic()
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            if time.monotonic() - idle_since > KEEP_ALIVE_S - 1:
                return  # the keep-alive timer fired as the request came in: closed, unanswered
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            # /embed's vectors, or an OpenAI model list (GET /models)
            body = b"[[0.6, 0.8]]" if b" /embed " in head else b'{"object": "list", "data": []}'
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                         b"content-length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            answered.append(time.monotonic())
            idle_since = time.monotonic()
    except (asyncio.IncompleteReadError, ConnectionError):
        return
    finally:
        writer.close()


async def _embeds(url: str) -> tuple[object, callable]:
    client = TeiClient(url)
    return client, lambda: client.embed(["a question"])


async def _lists_models(url: str) -> tuple[object, callable]:
    client = ChatClient(url, "m")
    return client, client.is_serving


async def _indexer_embeds(url: str) -> tuple[object, callable]:
    """The indexer's own pool of runtime clients (a build's batches)."""
    runtimes = EmbeddingRuntimes([url])
    (client,) = await runtimes.current()
    return runtimes, lambda: client.embed(["a chunk"])


@pytest.mark.parametrize("make", [_embeds, _lists_models, _indexer_embeds], ids=["tei", "chat", "indexer"])
async def test_a_connection_idle_close_to_the_servers_keep_alive_is_not_reused(make) -> None:
    answered: list[float] = []
    server = await asyncio.start_server(lambda r, w: _serve(r, w, answered), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client, call = await make(f"http://127.0.0.1:{port}")
    try:
        first = await call()
        await asyncio.sleep(KEEP_ALIVE_S - 0.5)  # idle, but younger than the server's keep-alive
        # Before: the pooled connection was reused and met the close: UNAVAILABLE (ReadError), or
        # for the chat client a runtime that does not serve.
        assert await call() == first and first
    finally:
        await client.close()
        server.close()
        await server.wait_closed()
    assert len(answered) == 2
