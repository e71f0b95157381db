"""The MCP server: five read-only tools and the corpora's files, on the official SDK's low-level
``Server``, which advertises exactly the methods it is given (tools and resources: no prompts,
logging or completions behind empty capabilities) and answers every other method -32601.

JSON-RPC errors: an unknown tool, malformed params and a cursor this server never issued are
-32602; a file that is not there (or not the caller's to read) is -32602 "Resource not found". A
tool that runs and fails is a tool result with ``isError``, as MCP asks, so the model can react.
"""

from __future__ import annotations

import importlib.metadata
import logging
from typing import Any

import mcp_types as types
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import request_id_var

from ragmesh_gateway.access.ports import Caller, RequestInfo
from ragmesh_gateway.citations import public_origin
from ragmesh_gateway.mcp.jsonrpc import as_mcp_error
from ragmesh_gateway.mcp.resources import BadResourceUri, CorpusFiles
from ragmesh_gateway.mcp.services import McpServices
from ragmesh_gateway.mcp.struct_tools import StructTool
from ragmesh_gateway.mcp.tools import INSTRUCTIONS, build_tools
from ragmesh_gateway.web.request_context import REQUEST_ID_HEADER, accept_request_id

log = logging.getLogger("ragmesh.gateway.mcp")

SERVER_NAME = "ragmesh"
# Scope-state key of the caller the /mcp edge authenticated (ragmesh_gateway.mcp.mount).
MCP_CALLER = "ragmesh_mcp_caller"


def server_version() -> str:
    try:
        return importlib.metadata.version("ragmesh")
    except importlib.metadata.PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def _no_cursor(params: types.PaginatedRequestParams | None) -> None:
    if params is not None and params.cursor is not None:
        raise MCPError(code=types.INVALID_PARAMS,
                       message="Invalid cursor: this server returns every item in one page and issues no cursors")


class RagmeshMcp:
    def __init__(self, services: McpServices) -> None:
        self._services = services
        self.tools: dict[str, StructTool] = {tool.name: tool for tool in build_tools(services)}
        self.files = CorpusFiles(services.files, max_bytes=services.settings.mcp_resource_max_bytes)
        self.server = Server(
            SERVER_NAME,
            version=server_version(),
            title="ragmesh",
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
        )

    async def list_tools(self) -> list[types.Tool]:
        return self.tool_definitions()

    def tool_definitions(self) -> list[types.Tool]:
        return [tool.definition() for tool in self.tools.values()]

    async def _list_tools(self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None):
        _no_cursor(params)
        return types.ListToolsResult(tools=await self.list_tools())

    async def _call_tool(self, ctx: ServerRequestContext, params: types.CallToolRequestParams):
        tool = self.tools.get(params.name)
        if tool is None:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}",
                           data={"tool": params.name, "tools": sorted(self.tools)})

        async def caller() -> Caller:
            return await self._caller(ctx)

        origin = public_origin(self._services.settings.public_url, getattr(ctx.request, "scope", None))
        try:
            return await tool.call(dict(params.arguments or {}), caller, origin)
        except Exception:
            log.exception("tool crashed", extra={"fields": {"tool": tool.name}})
            raise MCPError(code=types.INTERNAL_ERROR, message="Internal error") from None

    async def _list_resources(self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None):
        _no_cursor(params)
        return types.ListResourcesResult(resources=[])  # files are reached through the templates

    async def _list_templates(self, ctx: ServerRequestContext, params: types.PaginatedRequestParams | None):
        _no_cursor(params)
        caller = await self._guarded(self._caller(ctx))
        return types.ListResourceTemplatesResult(resource_templates=await self._guarded(self.files.templates(caller)))

    async def _read_resource(self, ctx: ServerRequestContext, params: types.ReadResourceRequestParams):
        uri = str(params.uri)
        caller = await self._guarded(self._caller(ctx))
        try:
            return await self.files.read(uri, caller)
        except BadResourceUri as exc:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Invalid resource URI: {exc}", data={"uri": uri}) from None
        except RagmeshError as exc:
            if exc.code is ErrorCode.NOT_FOUND:  # refused, unindexed and missing: one answer
                raise MCPError(code=types.INVALID_PARAMS, message="Resource not found", data={"uri": uri}) from None
            raise as_mcp_error(exc) from None

    async def _guarded(self, pending: Any) -> Any:
        try:
            return await pending
        except RagmeshError as exc:
            raise as_mcp_error(exc) from None

    async def _caller(self, ctx: ServerRequestContext) -> Caller:
        http_request = ctx.request
        headers = getattr(http_request, "headers", None) or {}
        # The handler may run in the session manager's task, so the request id comes from the header
        # the request-context layer rewrote, not from the HTTP task's context variable.
        request_id_var.set(accept_request_id(headers.get(REQUEST_ID_HEADER)))
        caller = getattr(http_request, "scope", {}).get("state", {}).get(MCP_CALLER)
        if caller is None:  # served without the /mcp mount (in-process clients): authenticate here
            client = getattr(http_request, "client", None)
            caller = await self._services.authenticator.authenticate(
                RequestInfo(headers=headers, client_host=client.host if client else None))
        return caller


def build_mcp_server(services: McpServices) -> RagmeshMcp:
    return RagmeshMcp(services)
