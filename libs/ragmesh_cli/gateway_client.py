"""The gateway's HTTP API as the CLI calls it: one request, the chat stream, and what an HTTP
status means as an exit code. Used by the query commands, `ragmesh mcp` and `ragmesh up --ask`.

Every request carries an ``X-Request-ID`` of the CLI's own making (the gateway keeps a well-formed
one), so an error can name the request it was even when the gateway's answer has no body to say
it; `ragmesh trace ID` shows that request's spans.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import uuid
from typing import Any

import httpx

from ragmesh_cli.addresses import Address, add_state_option, resolve
from ragmesh_cli.last_request import remember
from ragmesh_cli.output import EXIT_AUTH, EXIT_FAIL, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE

DEFAULT_URL = "http://127.0.0.1:8080"
REQUEST_ID_HEADER = "X-Request-ID"


def add_gateway_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default="", help="gateway URL (default $RAGMESH_URL, else the mesh serving from the "
                                             "state folder, else http://127.0.0.1:8080)")
    add_state_option(p)
    p.add_argument("--token", default="", help="bearer token (default $RAGMESH_TOKEN)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the gateway (default 60)")


def gateway_address(args) -> Address:
    """The gateway's URL and how it was chosen (ragmesh_cli.addresses); MeshNotFound when the state
    folder names no mesh to talk to."""
    return resolve(args, "gateway", flag="--url", flag_value=getattr(args, "url", ""), env="RAGMESH_URL",
                   default=DEFAULT_URL)


def gateway_token(args) -> str:
    return args.token or os.environ.get("RAGMESH_TOKEN", "")


def new_request_id(headers: dict | None = None) -> str:
    """The caller's own ``X-Request-ID`` when its headers carry one (a test or a proxy that
    follows a request by it), else a fresh one."""
    for name, value in (headers or {}).items():
        if name.lower() == REQUEST_ID_HEADER.lower() and value:
            return value
    return uuid.uuid4().hex


def unreachable(address: Address | str, exc: BaseException) -> str:
    return f"gateway unreachable at {address} ({type(exc).__name__})"


class GatewayCall:
    def __init__(self, args) -> None:
        self.address = gateway_address(args)
        self.url = self.address.value.rstrip("/")
        token = gateway_token(args)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = args.timeout
        self._sent: tuple[str, int] | None = None  # the last request's id and when it was sent

    def post(self, path: str, body: dict) -> tuple[int, Any]:
        return self._request("POST", path, body)

    def request_id(self) -> str:
        """A fresh request id for the request about to be sent (:meth:`reached` notes it)."""
        self._sent = (new_request_id(), time.time_ns())
        return self._sent[0]

    def reached(self) -> None:
        """The gateway answered the last request: noted as this command's last request to the mesh
        of the state folder, when that folder named the gateway (ragmesh_cli.last_request)."""
        if self._sent is not None and self.address.state is not None:
            remember(self.address.state, *self._sent)

    def get(self, path: str) -> tuple[int, Any]:
        return self._request("GET", path, None)

    def _request(self, method: str, path: str, body: dict | None) -> tuple[int, Any]:
        """(HTTP status, JSON body); status 0 when the gateway was not reached. An error body always
        holds ``request_id``: the gateway's, else its response header, else the one sent."""
        sent = self.request_id()
        try:
            resp = httpx.request(method, self.url + path, json=body, headers={**self.headers, REQUEST_ID_HEADER: sent},
                                 timeout=self.timeout)
        except httpx.HTTPError as exc:
            return 0, {"code": "UNAVAILABLE", "message": unreachable(self.address, exc)}
        self.reached()
        request_id = resp.headers.get(REQUEST_ID_HEADER) or sent
        try:
            data = resp.json()
        except ValueError:
            data = {"code": "INTERNAL", "message": f"gateway returned a non-JSON body (HTTP {resp.status_code})"}
        if resp.status_code != 200 and isinstance(data, dict) and not data.get("request_id"):
            data["request_id"] = request_id
        return resp.status_code, data


def error_line(data: dict) -> str:
    """``CODE: message (request id X)``: what the CLI says of a failed call on stderr."""
    line = f"{data.get('code', 'ERROR')}: {data.get('message', '')}"
    if data.get("request_id"):
        line += f" (request id {data['request_id']}; `ragmesh trace {data['request_id']}` shows its spans)"
    return line


def exit_code_for(status: int) -> int:
    # 429 is "try again later", like a downstream that is down: not the caller's arguments.
    if status == 0 or status in (429, 502, 503, 504):
        return EXIT_UNAVAILABLE
    if status in (401, 403):
        return EXIT_AUTH
    if status in (400, 404, 405, 409, 410, 413, 415, 422):
        return EXIT_USAGE
    return EXIT_OK if 200 <= status < 300 else EXIT_FAIL


def stream_answer(url: str, question: str, *, headers: dict, timeout: float, body_extra: dict | None = None,
                  address: Address | None = None) -> dict:
    """Consume the SSE chat stream; returns the collected answer, sources and terminal event (an
    error one holds the request id). ``address`` says how ``url`` was chosen, for an error."""
    from httpx_sse import connect_sse

    result: dict[str, Any] = {"answer": "", "sources": [], "security": None, "meta": {}, "terminal": None,
                              "status": 200}
    body = {"question": question, **(body_extra or {})}
    headers = {name: value for name, value in headers.items() if name.lower() != REQUEST_ID_HEADER.lower()} | {
        REQUEST_ID_HEADER: new_request_id(headers)}
    sent = headers[REQUEST_ID_HEADER]
    request_id = ""  # the gateway's, once it answered
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout, read=timeout)) as client:
            with connect_sse(client, "POST", url.rstrip("/") + "/api/rag/v1/chat/stream", json=body,
                             headers=headers) as source:
                result["status"] = source.response.status_code
                request_id = source.response.headers.get(REQUEST_ID_HEADER) or sent
                if source.response.status_code != 200:
                    source.response.read()
                    try:
                        result["terminal"] = {"event": "error", **source.response.json()}
                    except ValueError:
                        result["terminal"] = {"event": "error", "code": "INTERNAL",
                                              "message": f"HTTP {source.response.status_code}, no JSON body"}
                    result["terminal"]["request_id"] = result["terminal"].get("request_id") or request_id
                    return result
                for event in source.iter_sse():
                    data = json.loads(event.data) if event.data else {}
                    if event.event == "meta":
                        result["meta"] = data
                    elif event.event == "token":
                        result["answer"] += data.get("text", "")
                    elif event.event == "sources":
                        result["sources"] = data.get("sources", [])
                        result["security"] = data.get("security")
                    elif event.event in ("done", "error"):
                        result["terminal"] = {"event": event.event, **data}
                        break
    except httpx.HTTPError as exc:
        result["status"] = 0
        message = (unreachable(address or url, exc) if not request_id
                   else f"the answer stream from {address or url} broke off ({type(exc).__name__})")
        result["terminal"] = {"event": "error", "code": "UNAVAILABLE", "message": message}
    terminal = result["terminal"]
    if terminal is None:  # the stream ended without a terminal event
        terminal = result["terminal"] = {"event": "error", "code": "UNAVAILABLE", "message": "stream ended early"}
    if terminal["event"] == "error":
        terminal["request_id"] = terminal.get("request_id") or result["meta"].get("request_id") or request_id
    return result
