"""The gateway's HTTP API as the CLI calls it: one request, the chat stream, and what an HTTP
status means as an exit code. Used by the query commands, `ragmesh mcp` and `ragmesh up --ask`."""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

import httpx

from ragmesh_cli.output import EXIT_AUTH, EXIT_FAIL, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE

DEFAULT_URL = "http://127.0.0.1:8080"


def add_gateway_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default="", help="gateway URL (default $RAGMESH_URL or http://127.0.0.1:8080)")
    p.add_argument("--token", default="", help="bearer token (default $RAGMESH_TOKEN)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the gateway (default 60)")


def gateway_url(args) -> str:
    return args.url or os.environ.get("RAGMESH_URL") or DEFAULT_URL


def gateway_token(args) -> str:
    return args.token or os.environ.get("RAGMESH_TOKEN", "")


class GatewayCall:
    def __init__(self, args) -> None:
        self.url = gateway_url(args).rstrip("/")
        token = gateway_token(args)
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = args.timeout

    def post(self, path: str, body: dict) -> tuple[int, Any]:
        return self._request("POST", path, body)

    def get(self, path: str) -> tuple[int, Any]:
        return self._request("GET", path, None)

    def _request(self, method: str, path: str, body: dict | None) -> tuple[int, Any]:
        try:
            resp = httpx.request(method, self.url + path, json=body, headers=self.headers, timeout=self.timeout)
        except httpx.HTTPError as exc:
            return 0, {"code": "UNAVAILABLE", "message": f"gateway unreachable at {self.url} ({type(exc).__name__})"}
        try:
            return resp.status_code, resp.json()
        except ValueError:
            return resp.status_code, {"code": "INTERNAL", "message": "gateway returned a non-JSON body"}


def exit_code_for(status: int) -> int:
    # 429 is "try again later", like a downstream that is down: not the caller's arguments.
    if status == 0 or status in (429, 502, 503, 504):
        return EXIT_UNAVAILABLE
    if status in (401, 403):
        return EXIT_AUTH
    if status in (400, 404, 405, 409, 410, 413, 415, 422):
        return EXIT_USAGE
    return EXIT_OK if 200 <= status < 300 else EXIT_FAIL


def stream_answer(url: str, question: str, *, headers: dict, timeout: float, body_extra: dict | None = None) -> dict:
    """Consume the SSE chat stream; returns the collected answer, sources and terminal event."""
    from httpx_sse import connect_sse

    result: dict[str, Any] = {"answer": "", "sources": [], "security": None, "meta": {}, "terminal": None,
                              "status": 200}
    body = {"question": question, **(body_extra or {})}
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout, read=timeout)) as client:
            with connect_sse(client, "POST", url.rstrip("/") + "/api/rag/v1/chat/stream", json=body,
                             headers=headers) as source:
                result["status"] = source.response.status_code
                if source.response.status_code != 200:
                    source.response.read()
                    try:
                        result["terminal"] = {"event": "error", **source.response.json()}
                    except ValueError:
                        result["terminal"] = {"event": "error", "code": "INTERNAL"}
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
        result["terminal"] = {"event": "error", "code": "UNAVAILABLE", "message": type(exc).__name__}
    return result
