"""Auth on /mcp that MCP clients understand: the gateway's own code and message reach the user, and
OAuth 2.0 Protected Resource Metadata (RFC 9728) is served when an authorization server is set."""

from __future__ import annotations

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway_mesh import Mesh
from loopback_server import serve
from gateway_tokens import bearer, schema, token_app, tokens  # noqa: F401 - fixtures

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
AUTH_SERVER = "https://login.example.com/realms/docs"


def mcp_error_in(exc: BaseException) -> MCPError:
    """The MCPError the client raised (the SDK's task groups wrap it in exception groups)."""
    while not isinstance(exc, MCPError):
        assert isinstance(exc, BaseExceptionGroup), exc
        exc = exc.exceptions[0]
    return exc


async def test_the_python_client_shows_the_gateways_refusal(mesh: Mesh, pg_url, schema, tokens) -> None:
    async with serve(token_app(mesh, pg_url, schema, allow_anonymous=False)) as url:
        with pytest.raises(BaseException) as raised:
            async with Client(f"{url}/mcp") as client:
                await client.list_tools()
        missing = mcp_error_in(raised.value).error
        async with httpx2.AsyncClient(headers=bearer("rmk_0000000000000000_wrong")) as http:
            with pytest.raises(BaseException) as raised:
                async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as client:
                    await client.list_tools()
        wrong = mcp_error_in(raised.value).error
    # Was "Server returned an error response": now the gateway's code, message and what to do.
    assert missing.message.startswith("UNAUTHENTICATED: ") and "RAGMESH_TOKEN" in missing.message
    assert "ragmesh token create" in missing.message
    assert wrong.message.startswith("UNAUTHENTICATED: ")
    assert missing.data["code"] == "UNAUTHENTICATED"


async def test_a_401_is_a_json_rpc_error_with_the_stable_code(mesh: Mesh, pg_url, schema, tokens) -> None:
    async with serve(token_app(mesh, pg_url, schema, allow_anonymous=False)) as url:
        async with httpx.AsyncClient(timeout=10) as http:
            refused = await http.post(f"{url}/mcp", headers=MCP_HEADERS,
                                      json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
            bad = await http.post(f"{url}/mcp", headers={**MCP_HEADERS, **bearer("rmk_bad")},
                                  json={"jsonrpc": "2.0", "id": "x", "method": "tools/list"})
            metadata = await http.get(f"{url}/.well-known/oauth-protected-resource/mcp")
    body = refused.json()
    assert refused.status_code == 401
    # REST's {code, message, request_id} and JSON-RPC's {jsonrpc, id, error} side by side.
    assert body["code"] == "UNAUTHENTICATED" and body["message"] and body["request_id"]
    assert body["jsonrpc"] == "2.0" and body["id"] == 7
    assert body["error"]["message"].startswith("UNAUTHENTICATED: ")
    # No credentials: the bare challenge (RFC 6750 3.1); a rejected token says why.
    assert refused.headers["www-authenticate"] == 'Bearer realm="ragmesh"'
    assert bad.headers["www-authenticate"].startswith('Bearer realm="ragmesh", error="invalid_token", '
                                                      'error_description="')
    assert bad.json()["id"] == "x"
    # Without an authorization server there is no OAuth to discover: a static token is the way in.
    assert metadata.status_code == 404
    assert "resource_metadata" not in refused.headers["www-authenticate"]


async def test_protected_resource_metadata_when_an_authorization_server_is_set(
    mesh: Mesh, pg_url, schema, tokens
) -> None:
    app = token_app(mesh, pg_url, schema, allow_anonymous=False,
                    authorization_servers=[AUTH_SERVER], public_url="https://rag.example.com")
    async with serve(app) as url:
        async with httpx.AsyncClient(timeout=10) as http:
            refused = await http.post(f"{url}/mcp", headers=MCP_HEADERS,
                                      json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            at_path = await http.get(f"{url}/.well-known/oauth-protected-resource/mcp")
            at_root = await http.get(f"{url}/.well-known/oauth-protected-resource")
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == (
        'Bearer realm="ragmesh", '
        'resource_metadata="https://rag.example.com/.well-known/oauth-protected-resource/mcp"'
    )
    assert at_path.status_code == 200 and at_path.headers["content-type"].startswith("application/json")
    document = at_path.json()
    assert document["resource"] == "https://rag.example.com/mcp"
    assert document["authorization_servers"] == [AUTH_SERVER]
    assert document["bearer_methods_supported"] == ["header"]
    assert "rag:search" in document["scopes_supported"]
    assert at_root.json() == document
