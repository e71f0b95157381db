"""Every route answers only the host names in RAGMESH_ALLOWED_HOSTS (DNS-rebinding protection), the
same rule the MCP transport applies to /mcp: ``name`` matches exactly, ``name:*`` with any port.

Operations routes are exempt: probes and scrapers address a pod by its IP address.
"""

from __future__ import annotations

from typing import Any

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.mcp.jsonrpc import refusal_body
from ragmesh_gateway.web.errors import send_error
from ragmesh_gateway.web.request_context import request_id_of

OPERATIONS_ROUTES = frozenset({"/health/live", "/health/ready", "/metrics"})


def host_allowed(host: str, patterns: list[str]) -> bool:
    if not host:
        return False
    for pattern in patterns:
        if host == pattern or (pattern.endswith(":*") and host.startswith(pattern[:-1])):
            return True
    return False


class AllowedHosts:
    def __init__(self, app: Any, patterns: list[str]) -> None:
        self.app = app
        self.patterns = list(patterns)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") not in OPERATIONS_ROUTES:
            host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), "")
            if not host_allowed(host, self.patterns):
                # The rejected name is not echoed: it is whatever the sender chose to put there.
                error = RagmeshError(ErrorCode.MISDIRECTED_REQUEST,
                                     "this gateway does not answer for the host name in the Host header")
                body = refusal_body(error, request_id_of(scope)) if scope["path"].startswith("/mcp") else None
                await send_error(scope, send, error, has_credentials=False, body=body)
                return
        await self.app(scope, receive, send)
