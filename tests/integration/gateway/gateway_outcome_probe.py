"""Requests that end whole, degraded, in an ``error`` event and in a 503, through the gateway with
tracing on; spans go to RAGMESH_TRACE_FILE, each request's status line to stdout as JSON.

Started in its own process by test_api_span_outcome.py (a tracer provider can be set only once per
process, as for gateway_trace_probe.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import sys

from litestar.testing import AsyncTestClient

from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry

from gateway_mesh import running_mesh
from ragmesh_gateway.app import create_app

SEARCH, STREAM, CHAT = "/api/rag/v1/search", "/api/rag/v1/chat/stream", "/api/rag/v1/chat"


async def main() -> int:
    seen: dict[str, list] = {}

    async def ask(client: AsyncTestClient, request_id: str, path: str, body: dict) -> None:
        response = await client.post(path, json=body, headers={"X-Request-ID": request_id})
        events = re.findall(r"^event: (\w+)", response.text, re.MULTILINE) if path == STREAM else []
        seen[request_id] = [response.status_code, events[-1] if events else ""]

    with running_mesh() as mesh:
        async with AsyncTestClient(create_app(mesh.settings())) as client:
            await ask(client, "whole-search", SEARCH, {"query": "q"})
            await ask(client, "whole-stream", STREAM, {"question": "q"})
            mesh.rerank.mode = "down"
            await ask(client, "degraded-search", SEARCH, {"query": "q"})
            mesh.rerank.mode = "reverse"
            mesh.generation.mode = "fail_mid"
            await ask(client, "stream-error", STREAM, {"question": "q"})
            await ask(client, "bad-input", STREAM, {"question": " "})
            await mesh.stop("generation")
            await ask(client, "stream-degraded", STREAM, {"question": "q"})
            await ask(client, "chat-degraded", CHAT, {"question": "q"})
            await mesh.stop("retrieval")
            await ask(client, "retrieval-down", CHAT, {"question": "q"})
    print(json.dumps(seen))
    return 0


if __name__ == "__main__":
    setup_telemetry("gateway")
    code = asyncio.run(main())
    shutdown_telemetry()
    sys.exit(code)
