"""Run one search through the gateway with tracing on; spans go to RAGMESH_TRACE_FILE.

Started in its own process by test_api_tracing.py: an OpenTelemetry tracer provider can be set
only once per process, so this keeps the test independent of every other test's telemetry.
"""

from __future__ import annotations

import asyncio
import sys

from litestar.testing import AsyncTestClient

from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry

from gateway_mesh import running_mesh
from ragmesh_gateway.app import create_app


async def main() -> int:
    with running_mesh() as mesh:
        async with AsyncTestClient(create_app(mesh.settings())) as client:
            response = await client.post(
                "/api/rag/v1/search", json={"query": "trace me"}, headers={"X-Request-ID": "trace-probe-1"}
            )
    return 0 if response.status_code == 200 else 1


if __name__ == "__main__":
    setup_telemetry("gateway")
    code = asyncio.run(main())
    shutdown_telemetry()
    sys.exit(code)
