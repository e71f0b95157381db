"""Serve the MCP server's Streamable HTTP app at /mcp inside Litestar."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, asgi
from litestar.handlers import ASGIRouteHandler
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from ragmesh_gateway.settings import GatewaySettings

MOUNT_PATH = "/mcp"


def transport_security(allowed_hosts: list[str]) -> TransportSecuritySettings:
    """DNS-rebinding protection for the configured host names (``host`` or ``host:*``)."""
    origins = [f"{scheme}://{host}" for host in allowed_hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=list(allowed_hosts), allowed_origins=origins
    )


class McpMount:
    """The mounted ASGI app plus the lifespan that runs its session manager."""

    def __init__(self, server: MCPServer, settings: GatewaySettings) -> None:
        self.server = server
        # Litestar strips the mount path, so the MCP endpoint is "/" inside the mounted app.
        self.app = server.streamable_http_app(
            streamable_http_path="/",
            stateless_http=settings.mcp_stateless,
            json_response=True,
            transport_security=transport_security(settings.allowed_hosts),
            max_request_body_size=settings.max_body_bytes,
            host=settings.host,
        )

    def route_handler(self) -> ASGIRouteHandler:
        app = self.app

        @asgi(MOUNT_PATH, is_mount=True, copy_scope=True)
        async def mcp_endpoint(scope: Any, receive: Any, send: Any) -> None:
            await app(scope, receive, send)

        return mcp_endpoint

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield
