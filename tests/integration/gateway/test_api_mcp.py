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


def without_urls(mesh: Mesh) -> None:
    """docs@1 as indexed without a url base: citations open the gateway's source view."""
    for chunk in mesh.retrieval.chunks:
        chunk.url = chunk.source_path.removesuffix(".md")


async def test_every_tool_that_takes_a_question_calls_it_query_and_takes_question_as_its_alias(
    mesh: Mesh,
) -> None:
    async with serve(create_app(mesh.settings())) as base_url:
        async with Client(f"{base_url}/mcp") as client:
            schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            by_query = await client.call_tool("answer_from_articles", {"query": "how do I start?"})
            by_alias = await client.call_tool("answer_from_articles", {"question": "how do I start?"})
            both = await client.call_tool("answer_from_articles", {"query": "a", "question": "b"})
            neither = await client.call_tool("answer_from_articles", {"top_k": 2})
    asking = {name for name, schema in schemas.items() if {"query", "question"} & set(schema["properties"])}
    assert asking == {"search_articles", "answer_from_articles"}
    assert all("query" in schemas[name]["properties"] for name in asking)
    answer = schemas["answer_from_articles"]
    assert answer["oneOf"] == [{"required": ["query"]}, {"required": ["question"]}]
    assert "alias of query" in answer["properties"]["question"]["description"].lower()
    assert by_query.structured_content["answer"] == by_alias.structured_content["answer"] == "Grounded answer [S1]."
    assert [r.question for r in mesh.generation.requests] == ["how do I start?"] * 2
    assert both.is_error and both.content[0].text.startswith("INVALID_ARGUMENT:")
    assert "`query`" in both.content[0].text and "`question`" in both.content[0].text
    assert neither.is_error and neither.content[0].text.startswith("MALFORMED_BODY:")
    assert "`query`" in neither.content[0].text


async def test_citation_urls_are_absolute_on_the_gateway_origin(mesh: Mesh) -> None:
    without_urls(mesh)
    async with serve(create_app(mesh.settings())) as base_url:
        async with Client(f"{base_url}/mcp") as client:
            search = await client.call_tool("search_articles", {"query": "start", "top_k": 1})
            answer = await client.call_tool("answer_from_articles", {"query": "how?"})
            read = await client.call_tool("get_article_chunks", {"chunk_ids": [chunk_id(3)]})
    view = f"{base_url}/api/rag/v1/source/docs@1/guide/page"
    assert search.structured_content["results"][0]["url"] == f"{view}6.md?lines=6-9#L6"
    assert answer.structured_content["sources"][0]["url"] == f"{view}6.md?lines=6-9#L6"
    assert read.structured_content["chunks"][0]["url"] == f"{view}3.md?lines=3-6#L3"


async def test_a_configured_public_url_is_the_origin_of_citation_urls(mesh: Mesh) -> None:
    without_urls(mesh)
    settings = mesh.settings(public_url="https://rag.example.com")
    async with serve(create_app(settings)) as base_url:
        async with Client(f"{base_url}/mcp") as client:
            search = await client.call_tool("search_articles", {"query": "start", "top_k": 1})
    assert search.structured_content["results"][0]["url"].startswith(
        "https://rag.example.com/api/rag/v1/source/docs@1/guide/page6.md?")


async def test_an_answer_over_two_corpora_lists_both_index_versions(mesh: Mesh) -> None:
    mesh.retrieval.chunks[0].corpus, mesh.retrieval.chunks[0].index_version = "api@2", "v7"
    mesh.retrieval.corpora.append(type(mesh.retrieval.corpora[0])(
        corpus="api@2", library="api", version="2", visibility="public", active_index_version="v7",
        points=1, documents=1, state="active"))
    async with serve(create_app(mesh.settings(corpora=["docs@1", "api@2"]))) as base_url:
        async with Client(f"{base_url}/mcp") as client:
            answer = await client.call_tool("answer_from_articles", {"question": "how?", "top_k": 6})
    assert answer.structured_content["index_version"] is None
    assert sorted(answer.structured_content["index_versions"]) == ["v1", "v7"]
