"""Print what the MCP server publishes (instructions and tools) as JSON, for the stdio bridge:
``python -m ragmesh_gateway.mcp_catalog > libs/ragmesh_cli/mcp_catalog.json``.

``ragmesh mcp`` serves tools/list from that copy while the gateway cannot be reached, so a desktop
client sees the tools from its first request; tests/contract/test_mcp_schemas.py fails while the
copy differs from what the gateway publishes. Built from default settings, contacting no service.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from ragmesh_gateway.composition import GatewayServices, build_deps
from ragmesh_gateway.mcp.server import build_mcp_server
from ragmesh_gateway.settings import GatewaySettings


def catalog() -> dict[str, Any]:
    settings = GatewaySettings()
    mcp = build_mcp_server(GatewayServices.build(settings, build_deps(settings)))
    return {
        "instructions": mcp.server.instructions,
        "tools": [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in mcp.tool_definitions()],
    }


def render() -> str:
    return json.dumps(catalog(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render())
