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


class AllowedHosts:
    def __init__(self, app: Any, patterns: list[str], refusal_bodies: Mapping[str, RefusalBody] | None = None) -> None:
        self.app = app
        self.patterns = list(patterns)
        self.refusal_bodies = dict(refusal_bodies or {})
        # The rule above, split once: exact names in a set, ``name:*`` as prefixes.
        self._exact = frozenset(p.encode("latin-1") for p in patterns)
        self._prefixes = tuple(p[:-1].encode("latin-1") for p in patterns if p.endswith(":*"))

    def allows(self, host: bytes) -> bool:
        return bool(host) and (host in self._exact or host.startswith(self._prefixes))

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope.get("path") not in OPERATIONS_ROUTES:
            host = next((v for k, v in scope.get("headers", []) if k == b"host"), b"")
            if not self.allows(host):
                # The rejected name is not echoed: it is whatever the sender chose to put there.
                error = RagmeshError(ErrorCode.MISDIRECTED_REQUEST,
                                     "this gateway does not answer for the host name in the Host header")
                body = next((refusal(error, request_id_of(scope)) for prefix, refusal in self.refusal_bodies.items()
                             if scope["path"].startswith(prefix)), None)
                await send_error(scope, send, error, has_credentials=False, body=body)
                return
        await self.app(scope, receive, send)
