"""`ragmesh mcp`: the stdio MCP server for desktop clients (ragmesh_cli.mcp.bridge)."""

from __future__ import annotations

import argparse
import asyncio

from ragmesh_cli.gateway_client import add_gateway_options, gateway_address, gateway_token


def register(sub: argparse._SubParsersAction) -> None:
    m = sub.add_parser("mcp", help="stdio MCP server for desktop clients, forwarding to the gateway")
    add_gateway_options(m)
    m.set_defaults(func=cmd_mcp)


def cmd_mcp(args) -> int:
    from ragmesh_cli.mcp.bridge import Upstream, err, serve_stdio

    address = gateway_address(args)
    upstream = Upstream(address.value, token=gateway_token(args), timeout_s=args.timeout, log=err)
    err(f"forwarding to {upstream.endpoint} ({address.chosen_by})")
    asyncio.run(serve_stdio(upstream))
    return 0
