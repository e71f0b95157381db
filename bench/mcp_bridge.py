"""What `ragmesh mcp` costs per call: HTTP requests that reach the gateway and latency, next to the
same calls made directly over Streamable HTTP.

    .venv/bin/python bench/mcp_bridge.py [--calls 50] [--url URL] [--smoke]

The gateway runs over the gRPC test doubles downstream (tests/integration/gateway/serve_doubles.py,
its own process), so the figures are MCP and HTTP overhead only: no models, no search; ``--url``
measures a running gateway instead. Requests per call come from the gateway's own metrics
(``ragmesh_http_requests_total`` on /mcp). The bridge is a real `python -m ragmesh_cli.main mcp` process driven by the
official MCP client over stdio, as a desktop client drives it. One JSON line per path.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
from mcp import Client, StdioServerParameters

from ragmesh_bench.harness import RunningMesh, serve
from ragmesh_bench.smoke import parse_args

ROOT = Path(__file__).resolve().parents[1]
DOUBLES = ROOT / "tests" / "integration" / "gateway" / "serve_doubles.py"


@contextlib.contextmanager
def gateway_with_doubles() -> Iterator[str]:
    """The gateway over the gRPC test doubles, as its own process (serve_doubles.py)."""
    port, process = serve(lambda port: subprocess.Popen([sys.executable, str(DOUBLES), "--port", str(port)],
                                                        stdin=subprocess.DEVNULL), "/health/live")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(15)


def mcp_requests(url: str) -> int:
    """HTTP requests the gateway has answered on /mcp, from its own metrics."""
    text = httpx.get(f"{url}/metrics", timeout=10).raise_for_status().text
    total = 0.0
    for line in text.splitlines():
        if line.startswith("ragmesh_http_requests_total{") and 'route="/mcp' in line:
            total += float(line.rsplit(" ", 1)[1])
    return int(total)


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


async def measure(url: str, calls: int) -> None:
    async with Client(f"{url}/mcp") as direct:
        before = mcp_requests(url)
        times = await timed_calls(direct, calls)
        print(line("http", times, mcp_requests(url) - before - 1, calls), flush=True)
    bridge = StdioServerParameters(command=sys.executable, args=["-m", "ragmesh_cli.main", "mcp", "--url", url],
                                   env={**os.environ, "PYTHONUNBUFFERED": "1"})
    async with Client(bridge) as client:
        await client.list_tools()
        await asyncio.sleep(1.0)  # the bridge connects in the background
        before = mcp_requests(url)
        times = await timed_calls(client, calls)
        print(line("stdio_bridge", times, mcp_requests(url) - before - 1, calls), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--url", default="", help="a running gateway (default: one over the gRPC test doubles)")
    args = parse_args(parser)
    calls = 2 if args.smoke else args.calls
    if args.smoke:  # the running mesh's gateway: one process fewer to start
        args.url = RunningMesh.from_env().gateway_url
    if args.url:
        asyncio.run(measure(args.url.rstrip("/"), calls))
    else:
        with gateway_with_doubles() as url:
            asyncio.run(measure(url, calls))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
