"""`ragmesh mcp` through the official MCP client over stdio: the gateway's tools, unchanged.

The bridge runs as its own process (as a desktop client starts it) and forwards to a real gateway
served by uvicorn with gRPC doubles downstream.
"""

from __future__ import annotations

import sys

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from gateway_mesh import Mesh, chunk_id, serve
from gateway_process import free_port, gateway_env
from gateway_tokens import bearer, schema, token_app, tokens  # noqa: F401 - fixtures
from ragmesh_gateway.app import create_app


def bridge(url: str, *extra: str, **env: str) -> Client:
    return Client(
        StdioServerParameters(
            command=sys.executable,
            args=["-m", "ragmesh_cli.main", "mcp", "--url", url, *extra],
            env=gateway_env(**env),
        )
    )


def described(tools) -> dict:
    return {
        t.name: (t.description, t.input_schema, t.output_schema, t.annotations.read_only_hint) for t in tools
    }


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


async def test_stdio_forwards_the_token_and_reports_refusals(
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
        async with bridge(url, RAGMESH_TOKEN=tokens["reader"]) as client:
            from_env = await client.call_tool("list_corpora", {})
        async with bridge(url) as client:
            anonymous = await client.call_tool("search_articles", {"query": "q"})
            with pytest.raises(MCPError) as listing:
                await client.list_tools()
    assert listed == expected
    assert not allowed.is_error and not from_env.is_error
    assert lacking.is_error and lacking.content[0].text.startswith("PERMISSION_DENIED:")
    assert anonymous.is_error and anonymous.content[0].text.startswith("UNAUTHENTICATED:")
    assert "UNAUTHENTICATED" in listing.value.message


async def test_stdio_starts_without_a_gateway_and_says_it_is_unavailable() -> None:
    closed = f"http://127.0.0.1:{free_port()}"
    async with bridge(closed, "--timeout", "2") as client:
        result = await client.call_tool("search_articles", {"query": "q"})
    assert result.is_error
    assert result.content[0].text.startswith("UNAVAILABLE:") and closed in result.content[0].text
