"""`ragmesh mcp`: a stdio MCP server for desktop clients that forwards every call to the gateway.

Desktop MCP clients start a local command and talk to it over stdin/stdout, usually at login, long
before (or without) a gateway. This bridge is that command. It answers tools/list at once from its
own copy of what the gateway publishes (``mcp_catalog.json``, kept identical by a contract test),
connects to the gateway's ``/mcp`` in the background with backoff, keeps that one upstream session
for every call, and tells the client ``notifications/tools/list_changed`` when the gateway comes up
(with the gateway's own list from then on). It holds no retrieval logic: tools/call, resource
templates and reads go to the gateway unchanged, under the caller's bearer token, so tokens, scopes,
ACLs and rate limits are the gateway's. Every upstream failure becomes a tool error saying what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import importlib.resources
import json
import sys
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import Server
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourcesListChanged, ToolsListChanged
from mcp.shared.exceptions import MCPError

from ragmesh_cli.addresses import MeshNotFound

# HTTP refusals without a JSON-RPC error body (a proxy in between): the status says enough.
_STATUS_CODES = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 421: "MISDIRECTED_REQUEST", 429: "RATE_LIMITED"}
_GENERIC = "Server returned an error response"  # what the SDK says when a body was no JSON-RPC error
FIRST_RETRY_S, MAX_RETRY_S = 0.25, 5.0
# Refused (no or a bad token): retrying soon changes nothing; a tool call still retries at once.
REFUSED_RETRY_S = 60.0
_REFUSED = -32010  # the gateway's JSON-RPC code for an HTTP-level refusal


def package_version() -> str:
    """The installed ragmesh's version, as the gateway's /mcp reports its own."""
    try:
        return importlib.metadata.version("ragmesh")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def published_catalog() -> dict[str, Any]:
    """What the gateway publishes, as shipped with this package (instructions and tools)."""
    text = importlib.resources.files("ragmesh_cli").joinpath("mcp_catalog.json").read_text(encoding="utf-8")
    return json.loads(text)


class GatewayRefused(Exception):
    """The gateway (or a proxy in front of it) answered an MCP request with an HTTP error."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status = status
        self.code = code
        self.message = message


def _refusal(response: httpx2.Response) -> GatewayRefused:
    try:
        body = response.json()
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    error = body.get("error") if isinstance(body.get("error"), dict) else {}
    code = str(body.get("code") or _STATUS_CODES.get(response.status_code, "UNAVAILABLE"))
    message = str(error.get("message") or body.get("message") or f"the gateway answered HTTP {response.status_code}")
    return GatewayRefused(response.status_code, code, message.removeprefix(f"{code}: "))


class Upstream:
    """One session with the gateway's /mcp, opened in the background and reopened when it breaks."""

    def __init__(self, base_url: str, *, token: str = "", timeout_s: float = 60.0, log=lambda message: None,
                 locate: Callable[[], str] | None = None) -> None:
        self.endpoint = base_url.rstrip("/") + "/mcp"
        # Where the gateway is, asked again before each connection (the mesh's state-folder record)
        self._locate = locate
        self.timeout_s = timeout_s
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._log = log
        self._client: Client | None = None
        self._failure: BaseException | None = None
        self._attempts = 0
        self._changed = asyncio.Condition()
        self._kick = asyncio.Event()
        self._broken = asyncio.Event()
        self._refusals: list[GatewayRefused] = []
        self.tools: list[types.Tool] | None = None  # the gateway's own list, once connected
        self.on_up: list[Any] = []

    async def supervise(self) -> None:
        """Forever: connect, hold the session until a call finds it broken, back off, reconnect."""
        delay = FIRST_RETRY_S
        while True:
            try:
                if self._locate is not None:
                    self.endpoint = self._locate().rstrip("/") + "/mcp"
                async with self._session() as client:
                    self.tools = list((await client.list_tools(cache_mode="refresh")).tools)
                    await self._set(client, None)
                    delay = FIRST_RETRY_S
                    self._log(f"connected to {self.endpoint}")
                    for callback in self.on_up:
                        await callback()
                    await self._broken.wait()
            except Exception as exc:  # noqa: BLE001 - any failure to connect is retried with backoff
                if self._failure is None or type(exc) is not type(self._failure):
                    self._log(f"gateway not reachable yet: {describe_failure(exc, self.endpoint)}")
                await self._set(None, exc)
            finally:
                self._broken.clear()
            if self._client is not None:
                await self._set(None, self._failure)
            wait = REFUSED_RETRY_S if _refused(self._failure) else delay
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._kick.wait(), wait)  # a call asking wakes it early
            self._kick.clear()
            delay = min(delay * 2, MAX_RETRY_S)

    async def _set(self, client: Client | None, failure: BaseException | None) -> None:
        async with self._changed:
            self._client, self._failure = client, failure
            self._attempts += 1
            self._changed.notify_all()

    @contextlib.asynccontextmanager
    async def _session(self) -> AsyncIterator[Client]:
        async def remember_refusal(response: httpx2.Response) -> None:
            if response.status_code >= 400:
                await response.aread()
                self._refusals.append(_refusal(response))
                del self._refusals[:-1]

        http = httpx2.AsyncClient(headers=self._headers, timeout=httpx2.Timeout(self.timeout_s),
                                  event_hooks={"response": [remember_refusal]})
        async with http, Client(streamable_http_client(self.endpoint, http_client=http),
                                read_timeout_seconds=self.timeout_s) as client:
            yield client

    async def client(self) -> Client:
        """The live session, after one more connection attempt if there is none."""
        if self._client is not None:
            return self._client
        async with self._changed:
            seen = self._attempts
            self._kick.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: self._client is not None or self._attempts > seen),
                    self.timeout_s)
        if self._client is None:
            raise self._failure or TimeoutError()
        return self._client

    async def call(self, method: str, *args: Any) -> Any:
        client = await self.client()
        self._refusals.clear()
        try:
            return await getattr(client, method)(*args)
        except MCPError as exc:
            if exc.error.message == _GENERIC and self._refusals:
                raise self._refusals[-1] from None
            raise
        except Exception:
            self._broken.set()  # the transport failed: reconnect before the next call
            raise


def _refused(exc: BaseException | None) -> bool:
    while exc is not None and getattr(exc, "exceptions", None):
        exc = exc.exceptions[0]  # type: ignore[union-attr]
    return (isinstance(exc, MCPError) and exc.error.code == _REFUSED) or (
        isinstance(exc, GatewayRefused) and exc.status in (401, 403))


def describe_failure(exc: BaseException, endpoint: str) -> str:
    """``CODE: message; what to do`` for a failed forward, in the form the gateway's tool errors use."""
    group = getattr(exc, "exceptions", None)  # task groups wrap the transport's error
    if group:
        return describe_failure(group[0], endpoint)
    if isinstance(exc, MeshNotFound):
        return f"UNAVAILABLE: {exc.message}. This bridge keeps looking and picks the mesh up without a restart"
    if isinstance(exc, GatewayRefused):
        text = f"{exc.code}: {exc.message}"
        if exc.code == "UNAUTHENTICATED" and "RAGMESH_TOKEN" not in text:
            text += "; set RAGMESH_TOKEN (or --token) to a token from `ragmesh token create`"
        return text
    if isinstance(exc, MCPError):
        message = exc.error.message
        if message.split(":", 1)[0].isupper():  # already the gateway's "CODE: message"
            if message.startswith("UNAUTHENTICATED") and "RAGMESH_TOKEN" not in message:
                message += "; set RAGMESH_TOKEN (or --token) to a token from `ragmesh token create`"
            return message
        return f"UNAVAILABLE: the gateway's MCP endpoint {endpoint} failed ({message})"
    if isinstance(exc, TimeoutError):
        return f"DEADLINE_EXCEEDED: the gateway at {endpoint} did not answer in time; raise --timeout or try again"
    if isinstance(exc, (httpx2.TransportError, OSError)):
        return (f"UNAVAILABLE: the ragmesh gateway at {endpoint} is not reachable ({type(exc).__name__}); "
                "start it with `ragmesh up` or point --url / RAGMESH_URL at it. This bridge keeps retrying "
                "and picks it up without a restart")
    return f"UNAVAILABLE: forwarding to {endpoint} failed ({type(exc).__name__})"


def tool_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


class Bridge:
    """The stdio MCP server: the client-facing half."""

    def __init__(self, upstream: Upstream, catalog: dict[str, Any]) -> None:
        self.upstream = upstream
        self._own_tools = [types.Tool.model_validate(tool) for tool in catalog["tools"]]
        self._sessions: set[ServerSession] = set()
        self._bus = InMemorySubscriptionBus()
        self.server = Server(
            "ragmesh",
            version=package_version(),
            instructions=catalog["instructions"],
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_templates,
            on_read_resource=self._read_resource,
            on_subscriptions_listen=ListenHandler(self._bus),
        )
        self.server.add_notification_handler("notifications/initialized", types.NotificationParams,
                                              self._initialized)
        upstream.on_up.append(self._announce)

    async def _initialized(self, ctx: Any, params: Any) -> None:
        self._sessions.add(ctx.session)

    async def _announce(self) -> None:
        """The gateway came up: its list may differ from the shipped copy, and its files are readable."""
        await self._bus.publish(ToolsListChanged())
        await self._bus.publish(ResourcesListChanged())
        for session in list(self._sessions):
            try:
                await session.send_tool_list_changed()
                await session.send_resource_list_changed()
            except Exception:  # noqa: BLE001 - that client went away
                self._sessions.discard(session)

    async def _list_tools(self, ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        if params is not None and params.cursor is not None:
            raise MCPError(code=types.INVALID_PARAMS, message="Invalid cursor: every tool is in one page")
        return types.ListToolsResult(tools=self.upstream.tools or self._own_tools)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        known = {tool.name for tool in (self.upstream.tools or self._own_tools)}
        if params.name not in known:
            raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
        try:
            return await self.upstream.call("call_tool", params.name, dict(params.arguments or {}))
        except Exception as exc:  # noqa: BLE001 - a tool error the model can read and act on
            return tool_error(describe_failure(exc, self.upstream.endpoint))

    async def _list_resources(self, ctx: Any, params: types.PaginatedRequestParams | None):
        return types.ListResourcesResult(resources=[])  # files are reached through the templates

    async def _list_templates(self, ctx: Any, params: types.PaginatedRequestParams | None):
        try:
            return await self.upstream.call("list_resource_templates")
        except Exception:  # noqa: BLE001 - no gateway yet: no files yet (list_changed follows)
            return types.ListResourceTemplatesResult(resource_templates=[])

    async def _read_resource(self, ctx: Any, params: types.ReadResourceRequestParams):
        try:
            return await self.upstream.call("read_resource", str(params.uri))
        except MCPError:
            raise  # the gateway's own JSON-RPC error (not found, invalid URI, refusal)
        except Exception as exc:  # noqa: BLE001
            raise MCPError(code=types.INTERNAL_ERROR, message=describe_failure(exc, self.upstream.endpoint)) from None


async def serve_stdio(upstream: Upstream) -> None:
    bridge = Bridge(upstream, published_catalog())
    options = bridge.server.create_initialization_options(
        NotificationOptions(tools_changed=True, resources_changed=True))
    supervisor = asyncio.create_task(upstream.supervise())
    try:
        async with stdio_server() as (read_stream, write_stream):
            await bridge.server.run(read_stream, write_stream, options)
    finally:
        supervisor.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await supervisor


def err(message: str) -> None:
    print(f"ragmesh mcp: {message}", file=sys.stderr, flush=True)
