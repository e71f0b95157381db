"""`ragmesh mcp` through the official MCP client over stdio: the gateway's tools, unchanged.

The bridge runs as its own process (as a desktop client starts it: before, or without, a gateway)
and forwards to a real gateway served by uvicorn with gRPC doubles downstream.
"""

from __future__ import annotations

import asyncio
import sys
import uuid

import httpx2
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from gateway_mesh import Mesh, chunk_id
from loopback_server import serve
from gateway_process import free_port, gateway_env
from gateway_tokens import bearer, schema, token_app, tokens  # noqa: F401 - fixtures
from ragmesh_gateway.app import create_app


def bridge(url: str, *extra: str, env: dict[str, str] | None = None, **client_options) -> Client:
    return Client(
        StdioServerParameters(
            command=sys.executable,
            args=["-m", "ragmesh_cli.main", "mcp", "--url", url, *extra],
            env=gateway_env(**(env or {})),
        ),
        **client_options,
    )


def described(tools) -> dict:
    return {
        t.name: (t.description, t.input_schema, t.output_schema, t.annotations.read_only_hint) for t in tools
    }


class CountingMcpPosts:
    """ASGI wrapper counting the HTTP requests that reach /mcp (what the rate limiter charges)."""

    def __init__(self, app) -> None:
        self.app = app
        self.requests: list[str] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/mcp"):
            self.requests.append(scope["method"])
        await self.app(scope, receive, send)


async def test_stdio_lists_and_calls_the_gateway_tools(mesh: Mesh) -> None:
    async with serve(create_app(mesh.settings())) as url:
        async with Client(f"{url}/mcp") as direct:
            over_http = (await direct.list_tools()).tools
            direct_instructions = direct.instructions
        async with bridge(url) as client:
            over_stdio = (await client.list_tools()).tools
            instructions = client.instructions
            search = await client.call_tool("search_articles", {"query": "start", "top_k": 2})
            chunks = await client.call_tool("get_article_chunks", {"chunk_ids": [chunk_id(3)]})
            answer = await client.call_tool("answer_from_articles", {"question": "how?"})
            corpora = await client.call_tool("list_corpora", {})
            stats = await client.call_tool("knowledge_base_stats", {})
            refused = await client.call_tool("search_articles", {"query": "q", "bogus": 1})
    # Same names, descriptions and schemas as the gateway publishes: nothing is redefined here.
    assert described(over_stdio) == described(over_http) and len(over_stdio) == 5
    assert instructions == direct_instructions
    assert not search.is_error
    results = search.structured_content["results"]
    assert [r["chunk_id"] for r in results] == [chunk_id(6), chunk_id(5)]
    assert all(r["trust"] == "untrusted" for r in results)
    assert search.structured_content["security"]["trust"] == "untrusted"
    assert [c["chunk_id"] for c in chunks.structured_content["chunks"]] == [chunk_id(3)]
    assert answer.structured_content["answer"] == "Grounded answer [S1]."
    assert [c["corpus"] for c in corpora.structured_content["corpora"]] == ["docs@1"]
    assert stats.structured_content["points"] == 6
    assert refused.is_error and refused.content[0].text.startswith("UNKNOWN_FIELD:")
    # The bridge holds no retrieval logic: every call reached the gateway's doubles.
    assert [r.top_k for r in mesh.retrieval.searches][-1] >= 2


async def test_the_bridge_reports_the_package_version_as_the_gateway_does(mesh: Mesh) -> None:
    # main's bridge said version=''.
    import importlib.metadata

    async with serve(create_app(mesh.settings())) as url:
        async with Client(f"{url}/mcp") as direct:
            gateway = direct.server_info
        async with bridge(url) as client:
            stdio = client.server_info
    assert stdio.name == "ragmesh" and stdio.version == importlib.metadata.version("ragmesh") != ""
    assert stdio.version == gateway.version


async def test_bridge_started_before_the_gateway_lists_tools_and_works_once_it_is_up(mesh: Mesh) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    changed = asyncio.Event()

    async def on_message(message) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    # As a desktop client does it: the 2025 handshake, then tools/list right away.
    async with bridge(url, "--timeout", "5", mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities.tools.list_changed is True
        before = (await client.list_tools()).tools
        down = await client.call_tool("search_articles", {"query": "q"})
        async with serve(create_app(mesh.settings()), port=port):
            async with Client(f"{url}/mcp") as direct:
                published = (await direct.list_tools()).tools
            await asyncio.wait_for(changed.wait(), 15)
            after = (await client.list_tools(cache_mode="refresh")).tools
            up = await client.call_tool("search_articles", {"query": "start", "top_k": 1})
    # Served from the bridge's own copy of the gateway's schemas while the gateway was down.
    assert described(before) == described(published) == described(after)
    assert down.is_error and down.content[0].text.startswith("UNAVAILABLE:")
    assert url in down.content[0].text and "ragmesh up" in down.content[0].text
    assert not up.is_error and up.structured_content["results"][0]["chunk_id"] == chunk_id(6)


async def test_bridge_finds_the_mesh_its_state_folder_records_once_it_runs(mesh: Mesh, tmp_path) -> None:
    # main's bridge took only --url / $RAGMESH_URL: a mesh on `ragmesh up --port-base N` was never found.
    import os

    from ragmesh_cli.mesh import record
    from ragmesh_cli.mesh.lifecycle import StateFolder, identity

    state = tmp_path / "state"
    StateFolder(state).claim()
    client_params = StdioServerParameters(command=sys.executable, args=["-m", "ragmesh_cli.main", "mcp", "--state-dir",
                                                                        str(state), "--timeout", "5"], env=gateway_env())
    async with Client(client_params) as client:
        before = await client.call_tool("search_articles", {"query": "q"})
        async with serve(create_app(mesh.settings())) as url:
            record.write(state, record.MeshRecord(gateway_url=url, grpc={}, runtime_url="", owner=identity(os.getpid())))
            for _ in range(40):
                after = await client.call_tool("search_articles", {"query": "start", "top_k": 1})
                if not after.is_error:
                    break
                await asyncio.sleep(0.5)
    assert before.is_error and "no mesh is running from" in before.content[0].text, before.content[0].text
    assert not after.is_error, after.content[0].text
    assert after.structured_content["results"][0]["chunk_id"] == chunk_id(6)


async def test_one_upstream_session_serves_many_calls(mesh: Mesh, redis_url: str) -> None:
    # A budget of 8 requests: the old bridge spent 3 per call (initialize, initialized, call).
    settings = mesh.settings(rate_limits="mcp=0.01/8,*=100/100", redis_url=redis_url,
                             rate_limit_prefix=f"ragmesh:test:{uuid.uuid4().hex[:12]}")
    counting = CountingMcpPosts(create_app(settings))
    async with serve(counting) as url:
        async with bridge(url) as client:
            await client.list_tools()
            results = [await client.call_tool("list_corpora", {}) for _ in range(6)]
    assert [r.is_error for r in results] == [False] * 6, [r.content[0].text for r in results if r.is_error]
    # Connecting costs two requests (the version probe and tools/list), then one per forwarded call.
    assert counting.requests == ["POST"] * (2 + 6)


async def test_stdio_forwards_the_token_and_says_what_to_do_on_refusals(
    mesh: Mesh, pg_url: str, schema: str, tokens: dict[str, str]
) -> None:
    async with serve(token_app(mesh, pg_url, schema, allow_anonymous=False)) as url:
        async with httpx2.AsyncClient(headers=bearer(tokens["reader"])) as http:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http)) as direct:
                expected = described((await direct.list_tools()).tools)
        async with bridge(url, "--token", tokens["reader"]) as client:
            listed = described((await client.list_tools()).tools)
            allowed = await client.call_tool("search_articles", {"query": "q"})
            lacking = await client.call_tool("answer_from_articles", {"question": "q"})
        async with bridge(url, env={"RAGMESH_TOKEN": tokens["reader"]}) as client:
            from_env = await client.call_tool("list_corpora", {})
        async with bridge(url) as client:
            anonymous_listing = described((await client.list_tools()).tools)
            anonymous = await client.call_tool("search_articles", {"query": "q"})
    assert listed == expected == anonymous_listing
    assert not allowed.is_error and not from_env.is_error
    assert lacking.is_error and lacking.content[0].text.startswith("PERMISSION_DENIED:")
    assert "rag:answer" in lacking.content[0].text
    assert anonymous.is_error and anonymous.content[0].text.startswith("UNAUTHENTICATED:")
    assert "RAGMESH_TOKEN" in anonymous.content[0].text and "ragmesh token create" in anonymous.content[0].text


async def test_stdio_starts_without_a_gateway_and_says_it_is_unavailable() -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    async with bridge(closed, "--timeout", "2") as client:
        listed = (await client.list_tools()).tools
        result = await client.call_tool("search_articles", {"query": "q"})
    assert len(listed) == 5
    assert result.is_error
    assert result.content[0].text.startswith("UNAVAILABLE:") and closed in result.content[0].text


async def test_stdio_forwards_the_corpus_files_as_resources(mesh: Mesh, tmp_path) -> None:
    (tmp_path / "guide").mkdir()
    (tmp_path / "guide" / "page6.md").write_text("one\ntwo\nthree\n", encoding="utf-8")
    async with serve(create_app(mesh.settings(corpus_roots={"docs@1": str(tmp_path)}))) as url:
        async with bridge(url) as client:
            templates = (await client.list_resource_templates()).resource_templates
            read = await client.read_resource("ragmesh://files/docs@1/guide/page6.md?lines=2-3")
    assert [t.uri_template for t in templates] == ["ragmesh://files/docs@1/{+path}{?lines}"]
    assert read.contents[0].text == "two\nthree\n"
