"""/mcp speaks JSON-RPC as the spec says: the right error code for every bad message, no traceback.

Raw HTTP POSTs (what any MCP client sends) against a real uvicorn, so the exact JSON-RPC error
codes and HTTP statuses are visible: -32700 parse error, -32600 invalid request (batches too: MCP
removed them), -32601 for methods not offered, -32602 for unknown tools, bad params and bad cursors.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging

import httpx
import pytest
from mcp import Client

from gateway_mesh import Mesh
from loopback_server import serve
from ragmesh_gateway.app import create_app

HEADERS = {
    "content-type": "application/json",
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-06-18",
}
INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "test", "version": "1"},
}


async def post(base_url: str, body: bytes | str | object, **headers: str) -> httpx.Response:
    content = body if isinstance(body, (bytes, str)) else json.dumps(body)
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.post(f"{base_url}/mcp", content=content, headers={**HEADERS, **headers})


def rpc(method: str, params: object = None, id: int = 1) -> dict:
    message: dict = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


def error_of(response: httpx.Response) -> dict:
    body = response.json()
    assert body["jsonrpc"] == "2.0" and "result" not in body, body
    return body["error"]


@pytest.fixture
async def base_url(mesh: Mesh):
    async with serve(create_app(mesh.settings())) as url:
        yield url


async def test_initialize_names_the_package_version_and_only_real_capabilities(base_url: str) -> None:
    result = (await post(base_url, rpc("initialize", INIT))).json()["result"]
    assert result["serverInfo"]["name"] == "ragmesh"
    assert result["serverInfo"]["version"] == importlib.metadata.version("ragmesh") != ""
    # Tools and the corpora's files as resources; no prompts, logging or completions behind them.
    assert set(result["capabilities"]) == {"tools", "resources"}


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("prompts/list", {}),
        ("prompts/get", {"name": "nope"}),
        ("logging/setLevel", {"level": "info"}),
        ("completion/complete", {"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "v"}}),
        ("resources/subscribe", {"uri": "ragmesh://files/docs@1/guide/page6.md"}),
        ("no/such/method", {}),
    ],
)
async def test_methods_not_offered_are_method_not_found(base_url: str, method: str, params: dict) -> None:
    response = await post(base_url, rpc(method, params))
    assert error_of(response)["code"] == -32601


async def test_unknown_tool_is_invalid_params_not_a_tool_result(base_url: str) -> None:
    error = error_of(await post(base_url, rpc("tools/call", {"name": "delete_everything", "arguments": {}})))
    assert error["code"] == -32602
    assert "delete_everything" in error["message"]


@pytest.mark.parametrize(
    "params",
    [
        {"name": "search_articles", "arguments": "not an object"},
        {"arguments": {"query": "q"}},
        {"name": 42, "arguments": {}},
    ],
)
async def test_malformed_tool_call_params_are_invalid_params(base_url: str, params: dict) -> None:
    assert error_of(await post(base_url, rpc("tools/call", params)))["code"] == -32602


@pytest.mark.parametrize("method", ["tools/list", "resources/list", "resources/templates/list"])
async def test_a_cursor_the_server_never_issued_is_invalid_params(base_url: str, method: str) -> None:
    error = error_of(await post(base_url, rpc(method, {"cursor": "bm9wZQ"})))
    assert error["code"] == -32602 and "cursor" in error["message"]


async def test_malformed_json_is_a_parse_error(base_url: str) -> None:
    response = await post(base_url, b'{"jsonrpc": "2.0", "id": 1, "method": ')
    assert response.status_code == 400
    assert error_of(response)["code"] == -32700


@pytest.mark.parametrize(
    "body",
    [
        [rpc("ping", id=1), rpc("tools/list", id=2)],  # a batch: removed from MCP in 2025-06-18
        [],
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": {"nested": True}, "method": "ping"},
        b'"just a string"',
        42,
    ],
)
async def test_messages_that_are_not_one_json_rpc_object_are_invalid_requests(base_url: str, body) -> None:
    response = await post(base_url, body)
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32600
    # A short sentence of ours, not a validator's dump of the submitted message.
    assert "pydantic" not in error["message"] and "input_value" not in error["message"]
    assert len(error["message"]) < 200


async def test_an_oversized_message_is_refused_with_413_and_a_json_rpc_error(mesh: Mesh) -> None:
    async with serve(create_app(mesh.settings(max_body_bytes=4096))) as url:
        huge = rpc("tools/call", {"name": "search_articles", "arguments": {"query": "x" * 10_000}})
        response = await post(url, huge)
    assert response.status_code == 413
    assert error_of(response)["code"] == -32600


async def test_oversized_arguments_inside_the_limit_are_a_tool_error_with_the_rest_code(base_url: str) -> None:
    response = await post(base_url, rpc("tools/call", {"name": "search_articles", "arguments": {"query": "x" * 5000}}))
    result = response.json()["result"]
    assert result["isError"] is True and result["content"][0]["text"].startswith("QUERY_TOO_LONG:")


async def test_get_on_the_endpoint_is_405_when_no_server_stream_is_offered(base_url: str) -> None:
    async with httpx.AsyncClient(timeout=5) as http:
        response = await http.get(f"{base_url}/mcp", headers={"accept": "text/event-stream"})
        deleted = await http.delete(f"{base_url}/mcp")
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["code"] == "METHOD_NOT_ALLOWED"
    assert deleted.status_code == 405


async def test_the_official_client_still_works_without_the_get_stream(base_url: str) -> None:
    async with Client(f"{base_url}/mcp") as client:
        assert client.server_capabilities.prompts is None
        assert len((await client.list_tools()).tools) == 5


async def test_bad_messages_leave_no_traceback_in_the_logs(base_url: str, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    for body in (
        rpc("prompts/get", {"name": "nope"}),
        rpc("tools/call", {"name": "nope", "arguments": {}}),
        rpc("tools/call", {"name": "search_articles", "arguments": "x"}),
        rpc("resources/read", {"uri": "ragmesh://files/docs@1/../../etc/passwd"}),
        rpc("tools/list", {"cursor": "zz"}),
        [rpc("ping")],
        b"{not json",
    ):
        await post(base_url, body)
    with_traceback = [r for r in caplog.records if r.exc_info or "Traceback" in r.getMessage()]
    assert not with_traceback, [r.getMessage() for r in with_traceback]


async def test_rest_routes_refuse_a_host_outside_the_allowed_hosts(mesh: Mesh) -> None:
    settings = mesh.settings(allowed_hosts=["127.0.0.1:*", "localhost:*", "rag.example.com"])
    async with serve(create_app(settings)) as url:
        async with httpx.AsyncClient(timeout=5) as http:
            evil = await http.get(f"{url}/api/rag/v1/corpora", headers={"host": "evil.example"})
            named = await http.get(f"{url}/api/rag/v1/corpora", headers={"host": "rag.example.com"})
            local = await http.get(f"{url}/api/rag/v1/corpora")
            probe = await http.get(f"{url}/health/live", headers={"host": "10.0.0.7:8080"})
    assert evil.status_code == 421
    assert evil.json()["code"] == "MISDIRECTED_REQUEST"
    assert named.status_code == 200 and local.status_code == 200
    # Probes and scrapers address the pod by IP: operations routes do not check the name.
    assert probe.status_code == 200
