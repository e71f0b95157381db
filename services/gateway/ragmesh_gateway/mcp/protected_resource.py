"""OAuth 2.0 Protected Resource Metadata (RFC 9728) for /mcp, served when an authorization server is
configured (``RAGMESH_AUTHORIZATION_SERVERS``): MCP clients that speak OAuth find it through the
``resource_metadata`` of a 401 and go there for a token. Without one there is nothing to discover;
the document is a 404 that says to use a static bearer token.
"""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, get

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.citations import public_origin
from ragmesh_gateway.settings import GatewaySettings
from ragmesh_gateway.web.errors import error_responses

WELL_KNOWN = "/.well-known/oauth-protected-resource"


class ProtectedResourceMetadata(msgspec.Struct, kw_only=True):
    """RFC 9728 section 2, for the /mcp resource."""

    resource: str
    authorization_servers: list[str]
    bearer_methods_supported: list[str]
    scopes_supported: list[str]
    resource_name: str


def public_base(settings: GatewaySettings, scope: Any) -> str:
    """The URL clients reach this gateway at: RAGMESH_PUBLIC_URL, else what the request shows."""
    return public_origin(settings.public_url, scope) or f"{scope.get('scheme', 'http')}://{settings.host}"


def metadata_url(settings: GatewaySettings, scope: Any) -> str:
    return f"{public_base(settings, scope)}{WELL_KNOWN}/mcp"


class ProtectedResourceController(Controller):
    tags = ["operations"]

    @get(
        [WELL_KNOWN, f"{WELL_KNOWN}/mcp"],
        summary="OAuth 2.0 Protected Resource Metadata of /mcp (RFC 9728)",
        description="Only when RAGMESH_AUTHORIZATION_SERVERS is set; otherwise 404: use a static bearer token.",
        responses=error_responses(404),
    )
    async def protected_resource(self, request: Request, settings: GatewaySettings) -> ProtectedResourceMetadata:
        if not settings.authorization_servers:
            raise RagmeshError(ErrorCode.NOT_FOUND, "no OAuth authorization server is configured "
                               "(RAGMESH_AUTHORIZATION_SERVERS); send a static bearer token instead")
        return ProtectedResourceMetadata(
            resource=f"{public_base(settings, request.scope)}/mcp",
            authorization_servers=list(settings.authorization_servers),
            bearer_methods_supported=["header"],
            scopes_supported=[scope.value for scope in Scope],
            resource_name="ragmesh",
        )
