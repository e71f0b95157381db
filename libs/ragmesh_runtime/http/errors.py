"""Every failure leaves as JSON in the shape the real server would send, never as a stack trace.

TEI routes answer ``{"error": ..., "error_type": ...}`` with the status TEI's router gives each
error type (Empty 400, Validation and Tokenizer 422, Overloaded 429, Backend 424, Unhealthy 503;
a body over the size limit 413, a body that is not JSON 400, as axum answers them); TEI's
``/v1/embeddings`` answers its OpenAI-compatible ``{"message", "code", "type"}``; the other /v1
routes answer vLLM's OpenAI-style ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import logging

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException

from ragmesh_common.errors import ErrorCode, RagmeshError

log = logging.getLogger("ragmesh_runtime")

OPENAI_PREFIX = "/v1"
TEI_OPENAI_EMBEDDINGS = "/v1/embeddings"

# ErrorCode -> (HTTP status, TEI error_type). TEI serialises its ErrorType variants as written.
_TEI: dict[ErrorCode, tuple[int, str]] = {
    ErrorCode.QUERY_EMPTY: (400, "Empty"),
    ErrorCode.QUERY_TOO_LONG: (422, "Validation"),
    ErrorCode.BODY_TOO_LARGE: (413, "Validation"),
    ErrorCode.MALFORMED_BODY: (400, "Validation"),
    ErrorCode.INVALID_ARGUMENT: (422, "Validation"),
    ErrorCode.UNKNOWN_FIELD: (422, "Validation"),
    ErrorCode.RATE_LIMITED: (429, "Overloaded"),
    ErrorCode.UNAVAILABLE: (503, "Unhealthy"),
    ErrorCode.ROUTE_NOT_FOUND: (404, "Validation"),
    ErrorCode.NOT_FOUND: (404, "Validation"),
    ErrorCode.METHOD_NOT_ALLOWED: (405, "Validation"),
}
_OPENAI_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    405: "MethodNotAllowedError",
    413: "BadRequestError",
    422: "BadRequestError",
    429: "RateLimitError",
    503: "ServiceUnavailableError",
}
_HTTP_CODES = {
    400: ErrorCode.MALFORMED_BODY,
    404: ErrorCode.ROUTE_NOT_FOUND,
    405: ErrorCode.METHOD_NOT_ALLOWED,
    413: ErrorCode.BODY_TOO_LARGE,
    429: ErrorCode.RATE_LIMITED,
    503: ErrorCode.UNAVAILABLE,
}


def tei_error(error: RagmeshError) -> Response[bytes]:
    status, error_type = _tei_status(error)
    return _json(status, {"error": error.message, "error_type": error_type})


def tei_openai_error(error: RagmeshError) -> Response[bytes]:
    """TEI's OpenAICompatErrorResponse. Its router writes the type as "type", its OpenAPI document
    as "error_type": both are sent, so clients of either find it."""
    status, error_type = _tei_status(error)
    return _json(status, {"message": error.message, "code": status, "type": error_type, "error_type": error_type})


def _tei_status(error: RagmeshError) -> tuple[int, str]:
    status, error_type = _TEI.get(error.code, (424, "Backend"))
    return status, str(error.details.get("error_type", error_type))


def openai_error(error: RagmeshError) -> Response[bytes]:
    status, message = error.http_status, error.message
    if status >= 500 and status != 503:
        status, message = 500, "internal error"
    error_type = _OPENAI_TYPES.get(status, "InternalServerError")
    # A more precise type where the error names one (llama.cpp's "exceed_context_size_error").
    error_type = str(error.details.get("openai_type", error_type)) if status < 500 else error_type
    return _json(status, {"error": {"message": message, "type": error_type, "param": None, "code": status}})


def handle_exception(request: Request, exc: Exception) -> Response[bytes]:
    """The one place exceptions become responses; the path picks the wire format."""
    if isinstance(exc, RagmeshError):
        error = exc
    elif isinstance(exc, HTTPException):
        code = _HTTP_CODES.get(exc.status_code, ErrorCode.INVALID_ARGUMENT)
        error = RagmeshError(code, _http_message(exc, code))
    else:
        # A bug, not bad input: log it with its traceback here, tell the client nothing inside.
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        error = RagmeshError(ErrorCode.RUNTIME_ERROR, "Inference failed")
    if request.url.path == TEI_OPENAI_EMBEDDINGS:
        return tei_openai_error(error)
    if request.url.path.startswith(OPENAI_PREFIX):
        return openai_error(error)
    return tei_error(error)


def _http_message(exc: HTTPException, code: ErrorCode) -> str:
    if code is ErrorCode.BODY_TOO_LARGE:
        return "request body is too large"
    if code is ErrorCode.ROUTE_NOT_FOUND:
        return "no such route"
    if code is ErrorCode.METHOD_NOT_ALLOWED:
        return "method not allowed on this route"
    return str(exc.detail) if exc.detail else "bad request"


def _json(status: int, body: dict) -> Response[bytes]:
    return Response(content=msgspec.json.encode(body), status_code=status, media_type="application/json")
