"""Serve the MCP server's Streamable HTTP app at /mcp inside Litestar.

Every HTTP request to /mcp is rate limited (route class ``mcp``) and then authenticated before the
MCP app sees it, in the same order as REST routes: a refused request is a plain HTTP 429 or 401
(with ``WWW-Authenticate``), as MCP's authorization rules expect. The caller is left in the scope
state for the tools, which check their own scope. The SDK's own refusals (413, malformed JSON-RPC)
get the gateway's error fields on the way out (``ragmesh_gateway.mcp.refusals``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from litestar import Litestar, asgi
from litestar.datastructures import Headers
from litestar.handlers import ASGIRouteHandler
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings

from ragmesh_common.errors import RagmeshError

from ragmesh_gateway.access import RequestInfo, RouteClass
from ragmesh_gateway.deps import GatewayServices
from ragmesh_gateway.mcp.refusals import coded_refusals
from ragmesh_gateway.settings import GatewaySettings
from ragmesh_gateway.web.dependencies import admit
from ragmesh_gateway.web.errors import send_error

MOUNT_PATH = "/mcp"
# Scope-state key of the authenticated caller, read by the tools (ragmesh_gateway.mcp.server).
MCP_CALLER = "ragmesh_mcp_caller"


def transport_security(allowed_hosts: list[str]) -> TransportSecuritySettings:
    """DNS-rebinding protection for the configured host names (``host`` or ``host:*``)."""
    origins = [f"{scheme}://{host}" for host in allowed_hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=list(allowed_hosts), allowed_origins=origins
    )


class McpMount:
    """The mounted ASGI app plus the lifespan that runs its session manager."""

    def __init__(self, server: MCPServer, settings: GatewaySettings, services: GatewayServices) -> None:
        self.server = server
        self.services = services
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
        admitted = self.admitted

        @asgi(MOUNT_PATH, is_mount=True, copy_scope=True)
        async def mcp_endpoint(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
            elif await admitted(scope, send):
                await app(scope, receive, coded_refusals(scope, send))

        return mcp_endpoint

    async def admitted(self, scope: Any, send: Any) -> bool:
        """Rate limit, then authenticate; False when a refusal was sent instead."""
        headers = Headers.from_scope(scope)
        client = scope.get("client")
        info = RequestInfo(headers=headers, client_host=client[0] if client else None)
        try:
            await admit(self.services.rate_limiter, info, RouteClass.MCP, scope)
            caller = await self.services.authenticator.authenticate(info)
        except RagmeshError as exc:
            await send_error(scope, send, exc, has_credentials="authorization" in headers)
            return False
        scope.setdefault("state", {})[MCP_CALLER] = caller
        return True

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield
