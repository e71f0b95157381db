"""MCP tool schemas and REST bodies are one contract: any drift between them fails here.

Each tool is paired with the REST route that does the same thing. Its input schema must be the
JSON Schema of that route's request Struct, and its output schema that of the route's response
Struct, both as the MCP SDK publishes them in tools/list. The OpenAPI document must describe the
same fields too.
"""

from __future__ import annotations

import pytest

from ragmesh_gateway.app import create_app
from ragmesh_gateway.composition import GatewayServices, build_deps
from ragmesh_gateway.mcp.server import build_mcp_server
from ragmesh_gateway.mcp.struct_tools import struct_schema
from ragmesh_gateway.settings import GatewaySettings

# tool -> (HTTP method, REST path)
PAIRS = {
    "search_articles": ("POST", "/api/rag/v1/search"),
    "get_article_chunks": ("POST", "/api/rag/v1/chunks/batch-get"),
    "answer_from_articles": ("POST", "/api/rag/v1/chat"),
    "list_corpora": ("GET", "/api/rag/v1/corpora"),
    "knowledge_base_stats": ("GET", "/api/rag/v1/stats"),
}


@pytest.fixture(scope="module")
def app():
    return create_app(GatewaySettings())


@pytest.fixture(scope="module")
def openapi(app) -> dict:
    return app.openapi_schema.to_schema()


@pytest.fixture
async def listed_tools() -> dict:
    settings = GatewaySettings()
    server = build_mcp_server(GatewayServices.build(settings, build_deps(settings)))
    return {tool.name: tool for tool in await server.list_tools()}


def rest_handler(app, method: str, path: str):
    for route in app.routes:
        if route.path != path:
            continue
        for handler in route.route_handlers:
            if method in getattr(handler, "http_methods", ()):
                return handler
    raise AssertionError(f"no {method} {path} route")


def rest_types(app, method: str, path: str):
    handler = rest_handler(app, method, path)
    signature = handler.parsed_fn_signature
    data = signature.parameters.get("data")
    return (data.annotation if data else None), signature.return_type.annotation


def test_every_tool_has_a_rest_twin(listed_tools) -> None:
    assert set(listed_tools) == set(PAIRS)


@pytest.mark.parametrize("tool_name", sorted(PAIRS))
def test_tool_schemas_are_the_rest_struct_schemas(app, listed_tools, tool_name: str) -> None:
    method, path = PAIRS[tool_name]
    request_type, response_type = rest_types(app, method, path)
    tool = listed_tools[tool_name]
    assert tool.output_schema == struct_schema(response_type)
    if request_type is None:
        # A GET route takes no body; its tool takes no arguments and refuses any.
        assert tool.input_schema["properties"] == {} and tool.input_schema["additionalProperties"] is False
    else:
        assert tool.input_schema == struct_schema(request_type)


def _component(openapi: dict, schema: dict) -> dict:
    ref = schema["$ref"]
    return openapi["components"]["schemas"][ref.rsplit("/", 1)[-1]]


@pytest.mark.parametrize("tool_name", sorted(PAIRS))
def test_openapi_documents_the_same_fields(openapi, listed_tools, tool_name: str) -> None:
    method, path = PAIRS[tool_name]
    operation = openapi["paths"][path][method.lower()]
    tool = listed_tools[tool_name]
    documented_out = _component(
        openapi, operation["responses"]["200"]["content"]["application/json"]["schema"]
    )
    assert set(documented_out["properties"]) == set(tool.output_schema["properties"])
    assert set(documented_out.get("required", [])) == set(tool.output_schema.get("required", []))
    if "requestBody" in operation:
        documented_in = _component(openapi, operation["requestBody"]["content"]["application/json"]["schema"])
        assert set(documented_in["properties"]) == set(tool.input_schema["properties"])
        assert set(documented_in.get("required", [])) == set(tool.input_schema.get("required", []))
    else:
        assert tool.input_schema["properties"] == {}


def test_nested_references_resolve_inside_each_schema(listed_tools) -> None:
    def refs(node):
        if isinstance(node, dict):
            if "$ref" in node:
                yield node["$ref"]
            for value in node.values():
                yield from refs(value)
        elif isinstance(node, list):
            for value in node:
                yield from refs(value)

    for tool in listed_tools.values():
        for schema in (tool.input_schema, tool.output_schema):
            for ref in refs(schema):
                assert ref.startswith("#/$defs/") and ref.rsplit("/", 1)[-1] in schema["$defs"]


def test_the_stdio_bridge_ships_exactly_what_the_gateway_publishes() -> None:
    """`ragmesh mcp` lists tools from libs/ragmesh_cli/mcp_catalog.json until the gateway is up."""
    from pathlib import Path

    from ragmesh_gateway.mcp_catalog import render

    shipped = Path(__file__).resolve().parents[2] / "libs" / "ragmesh_cli" / "mcp_catalog.json"
    assert shipped.read_text(encoding="utf-8") == render(), (
        "stale: run `.venv/bin/python -m ragmesh_gateway.mcp_catalog > libs/ragmesh_cli/mcp_catalog.json`")
