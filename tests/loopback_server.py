"""An ASGI app under a real uvicorn on 127.0.0.1, for the test folders that need a live HTTP server.

It lives at the top of tests/ (on sys.path through tests/conftest.py, as doc_examples.py is) so the
gateway's and the runtime's integration tests use one copy.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator

import uvicorn
from litestar import Litestar


@contextlib.contextmanager
def serve_in_thread(app: Litestar) -> Iterator[str]:
    """Serve the app on a free loopback port, on its own event loop in a thread; yields the base URL.

    For module-scoped fixtures and synchronous tests, which have no running loop to serve from
    (gateway_mesh.serve is the async counterpart).
    """
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False, lifespan="on")
    server = uvicorn.Server(config)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(),), daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        threading.Event().wait(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        loop.close()
