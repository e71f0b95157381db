"""The MCP SDK's own HTTP refusals, in the gateway's error shape.

The Streamable HTTP transport answers some requests itself: 413 "Request body too large" and 400
"Invalid Content-Type header" as plain text, malformed JSON-RPC as a JSON-RPC error object. Every
error body of the gateway has a stable ``code``, so this layer rewrites those answers on the way
out: a JSON-RPC error keeps its members and gains ``code``/``message``/``request_id``; plain text
becomes ``{code, message, request_id}``. Successful answers (and SSE streams) pass untouched.
"""

from __future__ import annotations

import json
from typing import Any

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.web.request_context import request_id_of

_BY_STATUS = {
    400: ErrorCode.MALFORMED_BODY,
    403: ErrorCode.PERMISSION_DENIED,
    404: ErrorCode.NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    406: ErrorCode.INVALID_ARGUMENT,
    413: ErrorCode.BODY_TOO_LARGE,
    415: ErrorCode.UNSUPPORTED_MEDIA_TYPE,
    421: ErrorCode.INVALID_ARGUMENT,
}
# The SDK refuses a wrong content type with 400; REST routes say 415, and so does /mcp.
_WRONG_CONTENT_TYPE = "Invalid Content-Type header"


def coded_body(status: int, body: bytes, request_id: str) -> tuple[int, bytes]:
    """(status, JSON body with ``code``) for one refusal of the MCP app."""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "code" in parsed and isinstance(parsed["code"], str):
        return status, body  # already ours (the gateway's own refusals before the MCP app)
    text = body.decode("utf-8", "replace").strip()
    if text == _WRONG_CONTENT_TYPE:
        status = 415
    code = _BY_STATUS.get(status, ErrorCode.INTERNAL if status >= 500 else ErrorCode.INVALID_ARGUMENT)
    if isinstance(parsed, dict) and isinstance(parsed.get("error"), dict):
        message = str(parsed["error"].get("message") or code.value)[:300]
        out = {**parsed, "code": code.value, "message": message, "request_id": request_id}
    else:
        out = RagmeshError(code, text[:300] or code.value).to_body(request_id)
    return status, json.dumps(out, ensure_ascii=False).encode("utf-8")


def coded_refusals(scope: Any, send: Any) -> Any:
    """``send`` for the MCP app: answers of status >= 400 are buffered and rewritten."""
    pending: dict[str, Any] = {}

    async def wrapped(message: Any) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            pending.update(start=message, body=bytearray())
            return
        if message["type"] == "http.response.body" and pending:
            pending["body"] += message.get("body", b"")
            if message.get("more_body"):
                return
            status, body = coded_body(pending["start"]["status"], bytes(pending["body"]), request_id_of(scope))
            headers = [(k, v) for k, v in pending["start"].get("headers", [])
                       if k.lower() not in (b"content-type", b"content-length")]
            headers += [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            pending.clear()
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await send(message)

    return wrapped
