"""Every route answers only the host names in RAGMESH_ALLOWED_HOSTS (DNS-rebinding protection), the
same rule the MCP transport applies to /mcp: ``name`` matches exactly, ``name:*`` with any port.

Operations routes are exempt: probes and scrapers address a pod by its IP address. A protocol edge
with an error body of its own (JSON-RPC under /mcp) hands it in as ``refusal_bodies`` by path prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.web.errors import send_error
from ragmesh_gateway.web.request_context import request_id_of

# (error, request id) -> the body a protocol edge answers a refusal with.
RefusalBody = Callable[[RagmeshError, str], dict[str, Any]]
OPERATIONS_ROUTES = frozenset({"/health/live", "/health/ready", "/metrics"})


def host_allowed(host: str, patterns: list[str]) -> bool:
    if not host:
        return False
    for pattern in patterns:
        if host == pattern or (pattern.endswith(":*") and host.startswith(pattern[:-1])):
            return True
    return False


class AllowedHosts:
    def __init__(self, app: Any, patterns: list[str], refusal_bodies: Mapping[str, RefusalBody] | None = None) -> None:
        self.app = app
        self.patterns = list(patterns)
        self.refusal_bodies = dict(refusal_bodies or {})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") not in OPERATIONS_ROUTES:
            host = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), "")
            if not host_allowed(host, self.patterns):
                # The rejected name is not echoed: it is whatever the sender chose to put there.
                error = RagmeshError(ErrorCode.MISDIRECTED_REQUEST,
                                     "this gateway does not answer for the host name in the Host header")
                body = next((refusal(error, request_id_of(scope)) for prefix, refusal in self.refusal_bodies.items()
                             if scope["path"].startswith(prefix)), None)
                await send_error(scope, send, error, has_credentials=False, body=body)
                return
        await self.app(scope, receive, send)
