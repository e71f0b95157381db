"""MCP tools whose input and output JSON Schemas come from the REST API's msgspec Structs.

ragmesh derives tool schemas from the same msgspec Structs that define the REST bodies, so the two
contracts cannot drift (tests/contract/test_mcp_schemas.py checks it), and decodes arguments with
the REST rules too. A refused call (bad arguments, a missing scope, a downstream failure) is a tool
result with ``isError`` whose text starts with the REST code, so the model can read and correct it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import msgspec
import mcp_types as types

from ragmesh_common.errors import RagmeshError

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.web.body import convert_arguments

# (decoded arguments, the caller's lazy admission, the gateway's public origin for citation urls:
# "" when unknown) -> the REST response Struct.
Handler = Callable[[Any, "CallerSource", str], Awaitable[msgspec.Struct]]
CallerSource = Callable[[], Awaitable[Caller]]


def struct_schema(type_: type[msgspec.Struct]) -> dict[str, Any]:
    """msgspec's JSON Schema with the root ``$ref`` inlined (MCP wants ``type: object`` at the root),
    and ``oneOf`` required fields where the Struct declares ``__required_one_of__`` (an alias)."""
    schema = msgspec.json.schema(type_)
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    definitions = schema.get("$defs", {})
    root = dict(definitions[ref.rsplit("/", 1)[-1]])
    if one_of := getattr(type_, "__required_one_of__", ()):
        root["oneOf"] = [{"required": [name]} for name in one_of]
    # Nested structs still point into $defs; keep it whole so every $ref resolves.
    root["$defs"] = definitions
    return root


def tool_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


@dataclass(frozen=True)
class StructTool:
    name: str
    title: str
    description: str
    input_type: type[msgspec.Struct]
    output_type: type[msgspec.Struct]
    handler: Handler
    read_only: bool = True

    def definition(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=struct_schema(self.input_type),
            output_schema=struct_schema(self.output_type),
            annotations=types.ToolAnnotations(
                title=self.title, read_only_hint=self.read_only, destructive_hint=False, open_world_hint=False
            ),
        )

    async def call(self, arguments: dict[str, Any], caller: CallerSource,
                   origin: str = "") -> types.CallToolResult:
        try:
            result = await self.handler(convert_arguments(arguments, self.input_type), caller, origin)
        except RagmeshError as exc:
            return tool_error(f"{exc.code.value}: {exc.message}")
        structured = msgspec.to_builtins(result)
        text = json.dumps(structured, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=structured)
