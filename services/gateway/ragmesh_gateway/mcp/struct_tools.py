"""MCP tools whose input and output JSON Schemas come from the REST API's msgspec Structs.

The SDK derives tool schemas from Python signatures through pydantic; ragmesh derives them from
the same msgspec Structs that define the REST bodies instead, so the two contracts cannot drift
(tests/contract/test_mcp_schemas.py checks it). Arguments are decoded with the REST rules too.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from ragmesh_common.errors import RagmeshError

from ragmesh_gateway.web.body import convert_arguments

Handler = Callable[[Any, Context], Awaitable[msgspec.Struct]]


def struct_schema(type_: type[msgspec.Struct]) -> dict[str, Any]:
    """msgspec's JSON Schema with the root ``$ref`` inlined (MCP wants ``type: object`` at the root)."""
    schema = msgspec.json.schema(type_)
    ref = schema.get("$ref")
    if not isinstance(ref, str):
        return schema
    definitions = schema.get("$defs", {})
    root = dict(definitions[ref.rsplit("/", 1)[-1]])
    # Nested structs still point into $defs; keep it whole so every $ref resolves.
    root["$defs"] = definitions
    return root


class StructTool(Tool):
    input_type: Any = Field(exclude=True)
    output_type: Any = Field(exclude=True)

    @classmethod
    def of(
        cls,
        handler: Handler,
        *,
        name: str,
        title: str,
        description: str,
        input_type: type[msgspec.Struct],
        output_type: type[msgspec.Struct],
        read_only: bool = True,
    ) -> StructTool:
        return cls(
            fn=handler,
            name=name,
            title=title,
            description=description,
            parameters=struct_schema(input_type),
            fn_metadata=FuncMetadata(arg_model=ArgModelBase, output_schema=struct_schema(output_type)),
            is_async=True,
            annotations=ToolAnnotations(
                title=title, read_only_hint=read_only, destructive_hint=False, open_world_hint=False
            ),
            input_type=input_type,
            output_type=output_type,
        )

    async def run(self, arguments: dict[str, Any], context: Context, convert_result: bool = False) -> Any:
        try:
            params = convert_arguments(arguments, self.input_type)
            result = await self.fn(params, context)
        except RagmeshError as exc:
            # Reported inside the result (is_error) so the model can read the code and correct itself.
            raise ToolError(f"{exc.code.value}: {exc.message}") from exc
        structured = msgspec.to_builtins(result)
        text = json.dumps(structured, ensure_ascii=False)
        return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)
