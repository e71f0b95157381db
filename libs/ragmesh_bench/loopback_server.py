"""An ASGI app (a Litestar app, or a bare ASGI double such as the fake runtimes) under a real uvicorn
on 127.0.0.1, for the test folders that need a live HTTP server: ``serve`` from a running event
loop, ``serve_in_thread`` from synchronous code.

It lives in ragmesh_bench (installed with the project) so that the gateway's, runtime's, generation's
and rerank's integration tests (through tests/loopback_server.py) and the bench scripts use one copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Iterator

import uvicorn
from litestar import Litestar


async def read_body(receive) -> bytes:
    """The whole request body, for a bare ASGI double."""
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            return body


def _server(app: Litestar, port: int) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None, access_log=False,
                                         lifespan="on"))


def _base_url(server: uvicorn.Server) -> str:
    return f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"


@contextlib.asynccontextmanager
async def serve(app: Litestar, *, port: int = 0) -> AsyncIterator[str]:
    """Run the app on the running loop (a free port unless given); yields the base URL."""
    server = _server(app, port)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    try:
        yield _base_url(server)
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 15)


@contextlib.contextmanager
def serve_in_thread(app: Litestar) -> Iterator[str]:
    """Serve the app on a free loopback port, on its own event loop in a thread; yields the base URL.

    For module-scoped fixtures and synchronous tests, which have no running loop to serve from
    (``serve`` is the async counterpart).
    """
    server = _server(app, 0)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(),), daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        threading.Event().wait(0.02)
    try:
        yield _base_url(server)
    finally:
        server.should_exit = True
        thread.join(15)
        loop.close()
