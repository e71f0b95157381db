"""JSON-RPC at the /mcp edge: the envelope checks the SDK leaves to a validator dump, and the one
mapping from ragmesh errors to JSON-RPC errors.

A POST carries exactly one JSON-RPC object (MCP removed batches in 2025-06-18). Anything else is
answered here with a short sentence: -32700 when the body is not JSON, -32600 when it is not one
well-formed message. HTTP-level refusals (401, 403, 429, 421) carry a JSON-RPC error too, so MCP
clients that read error bodies show the gateway's own code and message, next to the REST fields
``code``/``message``/``request_id`` that every other ragmesh error has.
"""

from __future__ import annotations

from typing import Any

import msgspec
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR

from ragmesh_common.errors import ErrorCode, RagmeshError

# Implementation-defined (JSON-RPC server-error band): the request was refused before or instead of
# running (authentication, scope, rate limit, host); ``data.code`` holds the stable ragmesh code.
REFUSED = -32010
_REFUSALS = {ErrorCode.UNAUTHENTICATED, ErrorCode.PERMISSION_DENIED, ErrorCode.RATE_LIMITED,
             ErrorCode.MISDIRECTED_REQUEST}
_CLIENT_ERRORS = {ErrorCode.INVALID_ARGUMENT, ErrorCode.BODY_TOO_LARGE, ErrorCode.MALFORMED_BODY,
                  ErrorCode.UNKNOWN_FIELD}
# What to do about a refusal; the MCP clients show it to the person who can fix it.
HINTS = {
    ErrorCode.UNAUTHENTICATED: "send the header `Authorization: Bearer <token>` (for `ragmesh mcp`, set "
    "RAGMESH_TOKEN); an operator creates tokens with `ragmesh token create`",
    ErrorCode.PERMISSION_DENIED: "ask for a token with that scope (`ragmesh token create --scope ...`)",
    ErrorCode.RATE_LIMITED: "wait for Retry-After seconds, then retry",
    ErrorCode.MISDIRECTED_REQUEST: "use an allowed host name, or add this one to RAGMESH_ALLOWED_HOSTS",
}


class EnvelopeError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_message(body: bytes) -> None:
    """Raise EnvelopeError unless ``body`` is exactly one JSON-RPC 2.0 request, notification or response."""
    try:
        message = msgspec.json.decode(body)
    except msgspec.DecodeError:
        raise EnvelopeError(PARSE_ERROR, "Parse error: the body is not valid JSON") from None
    if isinstance(message, list):
        raise EnvelopeError(INVALID_REQUEST, "Invalid request: batches are not supported; "
                                             "send one JSON-RPC message per POST (MCP 2025-06-18 and later)")
    if not isinstance(message, dict):
        raise EnvelopeError(INVALID_REQUEST, "Invalid request: a JSON-RPC message is a JSON object")
    if message.get("jsonrpc") != "2.0":
        raise EnvelopeError(INVALID_REQUEST, 'Invalid request: "jsonrpc" must be "2.0"')
    has_id = "id" in message
    if has_id and not _valid_id(message["id"]):
        raise EnvelopeError(INVALID_REQUEST, 'Invalid request: "id" must be a string or an integer')
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            raise EnvelopeError(INVALID_REQUEST, 'Invalid request: "method" must be a non-empty string')
        if "params" in message and not isinstance(message["params"], dict):
            raise EnvelopeError(INVALID_REQUEST, 'Invalid request: "params" must be an object')
    elif not (has_id and ("result" in message) != ("error" in message)):
        raise EnvelopeError(INVALID_REQUEST, 'Invalid request: neither a request ("method") nor a response')


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def error_body(code: int, message: str, *, data: Any = None, message_id: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": message_id, "error": error}


def message_id_of(body: bytes) -> Any:
    """The id of a message that passed :func:`check_message` (None for notifications)."""
    return msgspec.json.decode(body).get("id")


def refusal_body(error: RagmeshError, request_id: str, *, message_id: Any = None) -> dict[str, Any]:
    """A refused /mcp request: the REST error fields and a JSON-RPC error, side by side."""
    hint = HINTS.get(error.code)
    text = f"{error.code.value}: {error.message}" + (f"; {hint}" if hint else "")
    data = {"code": error.code.value, "request_id": request_id, **error.details}
    return {**error.to_body(request_id), **error_body(REFUSED, text, data=data, message_id=message_id)}


def as_mcp_error(error: RagmeshError) -> MCPError:
    """A ragmesh error inside a JSON-RPC method (resources) as the JSON-RPC error a client expects."""
    data = {"code": error.code.value}
    text = f"{error.code.value}: {error.message}"
    if error.code in _REFUSALS:
        return MCPError(code=REFUSED, message=text, data=data)
    if error.code in _CLIENT_ERRORS:
        return MCPError(code=INVALID_PARAMS, message=text, data=data)
    return MCPError(code=INTERNAL_ERROR, message=text, data=data)
