"""What `ragmesh mcp` costs per call: HTTP requests that reach the gateway and latency, next to the
same calls made directly over Streamable HTTP.

    .venv/bin/python bench/mcp_bridge.py [--calls 50]

The gateway runs in this process under uvicorn with the gRPC test doubles downstream
(tests/integration/gateway/gateway_mesh.py), so the figures are MCP and HTTP overhead only: no
models, no search. The bridge is a real `python -m ragmesh_cli.main mcp` process driven by the
official MCP client over stdio, as a desktop client drives it. One JSON line per path.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration" / "gateway"))

from mcp import Client, StdioServerParameters  # noqa: E402

from gateway_mesh import running_mesh, serve  # noqa: E402
from ragmesh_gateway.app import create_app  # noqa: E402


class CountingRequests:
    def __init__(self, app) -> None:
        self.app = app
        self.count = 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            self.count += 1
        await self.app(scope, receive, send)


async def timed_calls(client: Client, calls: int) -> list[float]:
    await client.call_tool("list_corpora", {})  # warm-up, not counted
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        result = await client.call_tool("list_corpora", {})
        times.append((time.perf_counter() - started) * 1000)
        assert not result.is_error, result.content
    return times


def line(path: str, times: list[float], requests: int, calls: int) -> str:
    ordered = sorted(times)
    return json.dumps({
        "bench": "mcp_bridge", "path": path, "calls": calls,
        "http_requests_per_call": round(requests / calls, 2),
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 2),
        "load_avg_1m_before": round(os.getloadavg()[0], 2),
    })


async def main(calls: int) -> None:
    with running_mesh() as mesh:
        counting = CountingRequests(create_app(mesh.settings()))
        async with serve(counting) as url:
            async with Client(f"{url}/mcp") as direct:
                before = counting.count
                times = await timed_calls(direct, calls)
                print(line("http", times, counting.count - before - 1, calls), flush=True)
            bridge = StdioServerParameters(command=sys.executable, args=["-m", "ragmesh_cli.main", "mcp", "--url", url],
                                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
            async with Client(bridge) as client:
                await client.list_tools()
                await asyncio.sleep(1.0)  # the bridge connects in the background
                before = counting.count
                times = await timed_calls(client, calls)
                print(line("stdio_bridge", times, counting.count - before - 1, calls), flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    asyncio.run(main(parser.parse_args().calls))
