"""Serve the MCP server's Streamable HTTP app at /mcp inside Litestar: the HTTP edge of MCP.

In order, before the SDK sees a request: the method (stateless: POST only, so ``GET /mcp`` is 405
instead of a stream that never sends anything), the rate limit (route class ``mcp``), the body (one
JSON-RPC object within the size limit), then the token. Refusals are plain HTTP answers (401
with ``WWW-Authenticate``, 429 with ``Retry-After``), as MCP's authorization rules expect, whose
JSON carries both the REST error fields and a JSON-RPC error that MCP clients display. The caller
is left in the scope state for the tools, which check their own scope.
Answers the SDK gives itself (and the edge's JSON-RPC refusals) get the gateway's error fields on
the way out (``ragmesh_gateway.mcp.refusals``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
from litestar import Litestar, asgi
from litestar.datastructures import Headers
from litestar.handlers import ASGIRouteHandler
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import INVALID_REQUEST

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.ports import RequestInfo, RouteClass
from ragmesh_gateway.mcp.jsonrpc import EnvelopeError, check_message, error_body, message_id_of, refusal_body
from ragmesh_gateway.mcp.protected_resource import metadata_url
from ragmesh_gateway.mcp.refusals import coded_refusals
from ragmesh_gateway.mcp.server import MCP_CALLER, RagmeshMcp
from ragmesh_gateway.mcp.services import McpServices
from ragmesh_gateway.settings import GatewaySettings
from ragmesh_gateway.web.dependencies import admit, authenticate
from ragmesh_gateway.web.errors import send_error
from ragmesh_gateway.web.request_context import request_id_of

MOUNT_PATH = "/mcp"


def transport_security(allowed_hosts: list[str]) -> TransportSecuritySettings:
    """DNS-rebinding protection for the configured host names (``host`` or ``host:*``)."""
    origins = [f"{scheme}://{host}" for host in allowed_hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=list(allowed_hosts), allowed_origins=origins
    )


class BodyTooLarge(Exception):
    pass


async def read_body(receive: Any, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replaying(body: bytes, receive: Any) -> Any:
    """A ``receive`` that hands the already-read body to the SDK, then the connection's own events."""
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def send_json(send: Any, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    encoded = msgspec.json.encode(body)
    out = {"content-type": "application/json", "content-length": str(len(encoded)), **(headers or {})}
    await send({"type": "http.response.start", "status": status,
                "headers": [(k.encode(), v.encode()) for k, v in out.items()]})
    await send({"type": "http.response.body", "body": encoded})


class McpMount:
    """The mounted ASGI app plus the lifespan that runs its session manager."""

    def __init__(self, mcp: RagmeshMcp, settings: GatewaySettings, services: McpServices) -> None:
        self.mcp = mcp
        self.settings = settings
        self.services = services
        # Litestar strips the mount path, so the MCP endpoint is "/" inside the mounted app.
        self.app = mcp.server.streamable_http_app(
            streamable_http_path="/",
            stateless_http=settings.mcp_stateless,
            json_response=True,
            transport_security=transport_security(settings.allowed_hosts),
            max_request_body_size=settings.max_body_bytes,
            host=settings.host,
        )

    def route_handler(self) -> ASGIRouteHandler:
        edge = self.edge

        @asgi(MOUNT_PATH, is_mount=True, copy_scope=True)
        async def mcp_endpoint(scope: Any, receive: Any, send: Any) -> None:
            await edge(scope, receive, send)

        return mcp_endpoint

    async def edge(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        send = coded_refusals(scope, send)
        method = scope.get("method", "")
        if self.settings.mcp_stateless and method != "POST":
            error = RagmeshError(ErrorCode.METHOD_NOT_ALLOWED, "this MCP endpoint is stateless and offers no "
                                 "server stream: POST one JSON-RPC message per request")
            await send_error(scope, send, error, has_credentials=False, headers={"allow": "POST"})
            return
        headers = Headers.from_scope(scope)
        client = scope.get("client")
        info = RequestInfo(headers=headers, client_host=client[0] if client else None)
        message_id = None
        try:
            await admit(self.services.rate_limiter, info, RouteClass.MCP, scope)
            if method == "POST":
                body = await self.checked_body(receive, send)
                if body is None:
                    return
                message_id = message_id_of(body)
                receive = replaying(body, receive)
            caller = await authenticate(self.services.authenticator, info, scope)
        except RagmeshError as exc:
            await send_error(
                scope, send, exc,
                has_credentials="authorization" in headers,
                body=refusal_body(exc, request_id_of(scope), message_id=message_id),
                resource_metadata=metadata_url(self.settings, scope) if self.settings.authorization_servers else "",
            )
            return
        scope.setdefault("state", {})[MCP_CALLER] = caller
        await self.app(scope, receive, send)

    async def checked_body(self, receive: Any, send: Any) -> bytes | None:
        """The body, read within the limit and checked as one JSON-RPC message; None when refused."""
        try:
            body = await read_body(receive, self.settings.max_body_bytes)
        except BodyTooLarge:
            limit = self.settings.max_body_bytes
            await send_json(send, 413, error_body(INVALID_REQUEST, f"Request too large: at most {limit} bytes"))
            return None
        try:
            check_message(body)
        except EnvelopeError as exc:
            await send_json(send, 400, error_body(exc.code, exc.message))
            return None
        return body

    @asynccontextmanager
    async def lifespan(self, _: Litestar) -> AsyncIterator[None]:
        async with self.mcp.server.session_manager.run():
            yield
