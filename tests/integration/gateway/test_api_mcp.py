"""The MCP endpoint through the official MCP client over Streamable HTTP, against a real uvicorn."""

from __future__ import annotations

import asyncio
from urllib.parse import urlsplit

import pytest
from mcp import Client

from gateway_mesh import Mesh, chunk_id
from loopback_server import serve
from ragmesh_gateway.app import create_app

TOOLS = {
    "search_articles",
    "get_article_chunks",
    "answer_from_articles",
    "list_corpora",
    "knowledge_base_stats",
}


async def test_tools_list_describes_five_structured_tools(mesh: Mesh) -> None:
    async with serve(create_app(mesh.settings())) as base_url:
        async with Client(f"{base_url}/mcp") as client:
            listed = (await client.list_tools()).tools
    assert {t.name for t in listed} == TOOLS
    for tool in listed:
        assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object"
        assert tool.annotations.read_only_hint is True
    by_name = {t.name: t for t in listed}
    for name in ("search_articles", "get_article_chunks", "answer_from_articles"):
        description = by_name[name].description.lower()
        assert "untrusted" in description and "url" in description and "quote" in description
    assert by_name["search_articles"].input_schema["required"] == ["query"]
    assert by_name["search_articles"].input_schema["additionalProperties"] is False


async def test_tools_call_returns_structured_results(mesh: Mesh) -> None:
    async with serve(create_app(mesh.settings())) as base_url:
        # The client validates every structured result against the tool's output schema.
        async with Client(f"{base_url}/mcp") as client:
            search = await client.call_tool("search_articles", {"query": "start", "top_k": 2})
            chunks = await client.call_tool(
                "get_article_chunks", {"chunk_ids": [chunk_id(3)], "index_version": "v1"}
            )
            answer = await client.call_tool("answer_from_articles", {"question": "how?"})
            corpora = await client.call_tool("list_corpora", {})
            stats = await client.call_tool("knowledge_base_stats", {})

    assert not search.is_error
    results = search.structured_content["results"]
    assert [r["chunk_id"] for r in results] == [chunk_id(6), chunk_id(5)]
    assert results[0]["trust"] == "untrusted" and results[0]["source_id"] == "S1"
    assert search.structured_content["request_id"]
    assert [c["chunk_id"] for c in chunks.structured_content["chunks"]] == [chunk_id(3)]
    assert answer.structured_content["status"] == "done"
    assert answer.structured_content["answer"] == "Grounded answer [S1]."
    assert [s["source_id"] for s in answer.structured_content["sources"]] == ["S1"]
    assert [c["corpus"] for c in corpora.structured_content["corpora"]] == ["docs@1"]
    assert stats.structured_content["points"] == 6
    # Generation saw the same grounded sources as over REST.
    assert mesh.generation.requests[-1].question == "how?"


@pytest.mark.parametrize(
    ("arguments", "code"),
    [
        ({"query": "q", "bogus": 1}, "UNKNOWN_FIELD"),
        ({"query": ""}, "QUERY_EMPTY"),
        ({"query": "q", "top_k": 500}, "TOP_K_OUT_OF_RANGE"),
        ({"query": "q", "top_k": "3"}, "MALFORMED_BODY"),
        ({}, "MALFORMED_BODY"),
    ],
)
async def test_tool_argument_errors_use_the_rest_codes(mesh: Mesh, arguments: dict, code: str) -> None:
    async with serve(create_app(mesh.settings())) as base_url:
        async with Client(f"{base_url}/mcp") as client:
            result = await client.call_tool("search_articles", arguments)
    assert result.is_error
    assert result.content[0].text.startswith(f"{code}:")


async def test_downstream_failure_is_a_tool_error_not_a_crash(mesh: Mesh) -> None:
    await mesh.stop("retrieval")
    async with serve(create_app(mesh.settings())) as base_url:
        async with Client(f"{base_url}/mcp") as client:
            result = await client.call_tool("search_articles", {"query": "q"})
    assert result.is_error and result.content[0].text.startswith("UNAVAILABLE:")


async def raw_post(base_url: str, host: str, origin: str | None = None) -> int:
    parts = urlsplit(base_url)
    body = b'{"jsonrpc":"2.0","id":1,"method":"ping"}'
    headers = [
        "POST /mcp HTTP/1.1",
        f"Host: {host}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    if origin:
        headers.append(f"Origin: {origin}")
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(("\r\n".join(headers) + "\r\n\r\n").encode() + body)
    await writer.drain()
    status_line = await reader.readline()
    writer.close()
    return int(status_line.split()[1])


async def test_dns_rebinding_protection_checks_host_and_origin(mesh: Mesh) -> None:
    settings = mesh.settings(allowed_hosts=["127.0.0.1:*", "localhost:*", "rag.example.com"])
    async with serve(create_app(settings)) as base_url:
        port = urlsplit(base_url).port
        assert await raw_post(base_url, "evil.example") == 421
        assert await raw_post(base_url, f"evil.example:{port}") == 421
        assert await raw_post(base_url, f"127.0.0.1:{port}", origin="http://evil.example") == 403
        # Configured names pass the check (the request then fails or succeeds on MCP grounds).
        assert await raw_post(base_url, "rag.example.com") not in (421, 403)
        assert await raw_post(base_url, f"localhost:{port}", origin=f"http://localhost:{port}") not in (
            421,
            403,
        )
