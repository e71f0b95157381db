"""Strict JSON bodies with stable error codes, shared by REST routes and MCP tools.

Litestar converts bodies leniently ("8" becomes 8); the API promises strict JSON instead, so a
``before_request`` hook decodes the raw body with msgspec in strict mode against the handler's
``data`` type first and maps every failure to one code. msgspec's messages name fields and
expected types, never the submitted values, so they are safe to return.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import msgspec
from litestar import Request

from ragmesh_common.errors import ErrorCode, RagmeshError

T = TypeVar("T")

_AT = re.compile(r" - at `(?P<path>[^`]*)`$")
# "Expected `int` <= 50", "Expected `str` of length >= 1", "Expected `str` matching regex '...'".
_CONSTRAINT = re.compile(r"^Expected `[^`]+` (?:(?:of length )?(?P<op>[<>])=? ?-?\d|matching regex)")

# Constraint violations on these fields have their own codes; any other is INVALID_ARGUMENT.
_FIELD_CODES: dict[tuple[str, str], ErrorCode] = {
    ("$.query", ">"): ErrorCode.QUERY_EMPTY,
    ("$.query", "<"): ErrorCode.QUERY_TOO_LONG,
    ("$.question", ">"): ErrorCode.QUERY_EMPTY,
    ("$.question", "<"): ErrorCode.QUERY_TOO_LONG,
    ("$.top_k", ">"): ErrorCode.TOP_K_OUT_OF_RANGE,
    ("$.top_k", "<"): ErrorCode.TOP_K_OUT_OF_RANGE,
    ("$.chunk_ids", "<"): ErrorCode.TOO_MANY_IDS,
}


def validation_error(message: str) -> RagmeshError:
    match = _AT.search(message)
    path = match.group("path") if match else "$"
    if message.startswith("Object contains unknown field"):
        return RagmeshError(ErrorCode.UNKNOWN_FIELD, message, {"path": path})
    constraint = _CONSTRAINT.match(message)
    if constraint:
        code = _FIELD_CODES.get((path, constraint.group("op")), ErrorCode.INVALID_ARGUMENT)
        return RagmeshError(code, message, {"path": path})
    return RagmeshError(ErrorCode.MALFORMED_BODY, message, {"path": path})


def decode_json(raw: bytes, type_: type[T]) -> T:
    try:
        return msgspec.json.decode(raw, type=type_, strict=True)
    except UnicodeDecodeError:
        raise RagmeshError(ErrorCode.MALFORMED_BODY, "request body is not valid UTF-8") from None
    except msgspec.ValidationError as exc:
        raise validation_error(str(exc)) from None
    except msgspec.DecodeError:
        raise RagmeshError(ErrorCode.MALFORMED_BODY, "request body is not valid JSON") from None


def convert_arguments(arguments: dict[str, Any], type_: type[T]) -> T:
    """MCP tool arguments (already parsed JSON) -> the request Struct, with the same rules."""
    try:
        return msgspec.convert(arguments, type=type_, strict=True)
    except msgspec.ValidationError as exc:
        raise validation_error(str(exc)) from None


async def strict_json_body(request: Request) -> None:
    """``before_request`` hook: refuse a body that is not strictly the handler's ``data`` type."""
    parameter = request.route_handler.parsed_fn_signature.parameters.get("data")
    if parameter is None:
        return None
    decode_json(await request.body(), parameter.annotation)
    return None
