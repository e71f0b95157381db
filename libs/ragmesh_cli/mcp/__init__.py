"""`ragmesh mcp`: the stdio MCP server for desktop clients (ragmesh_cli.mcp.bridge).

Without --url or $RAGMESH_URL the bridge looks for the mesh serving from the state folder each time
it connects (ragmesh_cli.addresses), so a desktop client that starts it at login finds a mesh that
`ragmesh up --port-base N` starts later; until then every tool call says why there is none.
"""

from __future__ import annotations

import argparse
import asyncio
import os

from ragmesh_cli.addresses import MeshNotFound
from ragmesh_cli.gateway_client import DEFAULT_URL, add_gateway_options, gateway_address, gateway_token


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("mcp", help="stdio MCP server for desktop clients, forwarding to the gateway")
    add_gateway_options(m)
    m.set_defaults(func=cmd_mcp)


def cmd_mcp(args) -> int:
    from ragmesh_cli.mcp.bridge import Upstream, err, serve_stdio

    fixed = bool(args.url or os.environ.get("RAGMESH_URL"))
    try:
        address = gateway_address(args)
        first, chosen_by = address.value, address.chosen_by
    except MeshNotFound as missing:
        first, chosen_by = DEFAULT_URL, f"for now: {missing.message}"
    upstream = Upstream(first, token=gateway_token(args), timeout_s=args.timeout, log=err,
                        locate=None if fixed else (lambda: gateway_address(args).value))
    err(f"forwarding to {upstream.endpoint}" + ("" if chosen_by == "--url" else f" ({chosen_by})"))
    asyncio.run(serve_stdio(upstream))
    return 0
