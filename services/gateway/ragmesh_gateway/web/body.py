"""Strict JSON bodies with stable error codes, shared by REST routes and MCP tools.

Litestar converts bodies leniently ("8" becomes 8); the API promises strict JSON instead, so a
``before_request`` hook decodes the raw body with msgspec in strict mode against the handler's
``data`` type first and maps every failure to one code. msgspec's messages name fields and
expected types, never the submitted values, so they are safe to return.

A JSON route takes ``application/json`` only (415 otherwise): a browser sends ``text/plain`` or a
form cross-origin without a CORS preflight, so accepting those would let any web page post to the
API with a visitor's network position. Every string in a body (and every query parameter) is safe
text (``ragmesh_common.text_safety``), checked before the typed decode.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeVar
from urllib.parse import parse_qsl

import msgspec
from litestar import Request

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.text_safety import check_strings, check_text, invalid_character

T = TypeVar("T")

_AT = re.compile(r" - at `(?P<path>[^`]*)`$")
# "Expected `int` <= 50", "Expected `str` of length >= 1", "Expected `str` matching regex '...'".
_CONSTRAINT = re.compile(r"^Expected `[^`]+` (?:(?:of length )?(?P<op>[<>])=? ?-?\d|(?P<regex>matching regex))")

# Constraint violations on these fields have their own codes; any other is INVALID_ARGUMENT.
_FIELD_CODES: dict[tuple[str, str], ErrorCode] = {
    ("$.query", ">"): ErrorCode.QUERY_EMPTY,
    ("$.query", "<"): ErrorCode.QUERY_TOO_LONG,
    ("$.question", ">"): ErrorCode.QUERY_EMPTY,
    ("$.question", "<"): ErrorCode.QUERY_TOO_LONG,
    ("$.top_k", ">"): ErrorCode.TOP_K_OUT_OF_RANGE,
    ("$.top_k", "<"): ErrorCode.TOP_K_OUT_OF_RANGE,
    ("$.chunk_ids", "<"): ErrorCode.TOO_MANY_IDS,
    # Control characters are refused before (INVALID_CHARACTER), so what the pattern refuses is a blank.
    ("$.query", "regex"): ErrorCode.QUERY_EMPTY,
    ("$.question", "regex"): ErrorCode.QUERY_EMPTY,
}


_CHUNK_ID_PATH = re.compile(r"^\$\.chunk_ids\[\d+\]$")


def validation_error(message: str) -> RagmeshError:
    match = _AT.search(message)
    path = match.group("path") if match else "$"
    if message.startswith("Object contains unknown field"):
        return RagmeshError(ErrorCode.UNKNOWN_FIELD, message, {"path": path})
    if _CHUNK_ID_PATH.match(path) and "matching regex" in message:
        return RagmeshError(ErrorCode.MALFORMED_CHUNK_ID, "chunk ids must be lower-case UUID strings", {"path": path})
    constraint = _CONSTRAINT.match(message)
    if constraint:
        kind = "regex" if constraint.group("regex") else constraint.group("op")
        code = _FIELD_CODES.get((path, kind), ErrorCode.INVALID_ARGUMENT)
        return RagmeshError(code, message, {"path": path})
    return RagmeshError(ErrorCode.MALFORMED_BODY, message, {"path": path})


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _untyped(raw: bytes) -> Any:
    try:
        return msgspec.json.decode(raw)
    except UnicodeDecodeError:
        raise RagmeshError(ErrorCode.MALFORMED_BODY, "request body is not valid UTF-8") from None
    except msgspec.DecodeError:
        # msgspec refuses a lone surrogate escape ("\ud800") as malformed JSON; it is valid JSON
        # holding text no store can encode, so say that instead.
        if _SURROGATE_ESCAPE.search(raw):
            try:
                check_strings(json.loads(raw))
            except ValueError:
                pass
        raise RagmeshError(ErrorCode.MALFORMED_BODY, "request body is not valid JSON") from None


def _integral_floats_as_ints(value: Any) -> Any:
    """JSON Schema counts 8.0 as an integer (a number with no fraction), and so does the API: the
    strict decode refuses a float where an int is expected, so integral floats become ints first."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral_floats_as_ints(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral_floats_as_ints(item) for item in value]
    return value


def decode_json(raw: bytes, type_: type[T]) -> T:
    document = _untyped(raw)
    check_strings(document)
    try:
        return msgspec.convert(_integral_floats_as_ints(document), type=type_, strict=True)
    except msgspec.ValidationError as exc:
        raise validation_error(str(exc)) from None


def convert_arguments(arguments: dict[str, Any], type_: type[T]) -> T:
    """MCP tool arguments (already parsed JSON) -> the request Struct, with the same rules."""
    check_strings(arguments)
    try:
        return msgspec.convert(_integral_floats_as_ints(arguments), type=type_, strict=True)
    except msgspec.ValidationError as exc:
        raise validation_error(str(exc)) from None


def is_json_media_type(content_type: str | None) -> bool:
    return (content_type or "").split(";", 1)[0].strip().lower() == "application/json"


def check_query_string(query_string: bytes) -> None:
    """Every query parameter is UTF-8 and safe text (``corpus=%00`` never reaches a store)."""
    if not query_string:
        return
    try:
        pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True, encoding="utf-8",
                          errors="strict")
    except UnicodeDecodeError:
        raise invalid_character("query") from None
    for name, value in pairs:
        check_text(name, "query")
        check_text(value, f"query.{name}")


async def strict_json_body(request: Request) -> None:
    """``before_request`` hook: refuse a body that is not strictly the handler's ``data`` type."""
    check_query_string(request.scope.get("query_string", b""))
    parameter = request.route_handler.parsed_fn_signature.parameters.get("data")
    if parameter is None:
        return None
    if not is_json_media_type(request.headers.get("content-type")):
        raise RagmeshError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, "send the body as application/json",
                           {"expected": "application/json"})
    decode_json(await request.body(), parameter.annotation)
    return None
