"""The one mapping from exceptions to HTTP answers: status + {code, message, request_id}.

Every error body has the same shape. Unexpected exceptions become 500 INTERNAL with a generic
message; the stack trace goes to the server log only.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import (
    HTTPException,
    MethodNotAllowedException,
    NotFoundException,
    ValidationException,
)
from litestar.openapi import ResponseSpec

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import mark_request_failed

from ragmesh_gateway.web.body import validation_error
from ragmesh_gateway.web.request_context import request_id_of

log = logging.getLogger("ragmesh.gateway.errors")


class ErrorBody(msgspec.Struct, kw_only=True):
    """Every error answer. ``code`` is stable (ragmesh_common.errors.ErrorCode); ``message`` is for people."""

    code: str
    message: str
    request_id: str | None = None
    details: dict[str, Any] | None = None


_DESCRIPTIONS = {
    400: "Invalid request (MALFORMED_BODY, UNKNOWN_FIELD, QUERY_EMPTY, TOP_K_OUT_OF_RANGE, ...)",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND (absent and unreadable look the same)",
    409: "CONFLICT (the index changed under the request)",
    410: "INDEX_VERSION_GONE",
    413: "BODY_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE (JSON routes take application/json only)",
    422: "VALIDATION_FAILED / BUILD_FAILED",
    429: "RATE_LIMITED",
    503: "UNAVAILABLE / NO_ACTIVE_INDEX",
    504: "DEADLINE_EXCEEDED",
}


def error_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """OpenAPI entries for the error answers a route can give."""
    return {
        s: ResponseSpec(data_container=ErrorBody, description=_DESCRIPTIONS[s], generate_examples=False)
        for s in statuses
    }


def as_ragmesh_error(exc: Exception) -> RagmeshError:
    if isinstance(exc, RagmeshError):
        return exc
    if isinstance(exc, (ConnectionError, TimeoutError)):
        # A store or upstream that is down, reached by code that did not map it: an outage.
        return RagmeshError(ErrorCode.UNAVAILABLE, "a dependency is unavailable")
    if isinstance(exc, NotFoundException):
        return RagmeshError(ErrorCode.ROUTE_NOT_FOUND, "no such route")
    if isinstance(exc, MethodNotAllowedException):
        return RagmeshError(ErrorCode.METHOD_NOT_ALLOWED, "method not allowed on this route")
    if isinstance(exc, ValidationException):
        messages = [str(item.get("message", "")) for item in (exc.extra or []) if isinstance(item, dict)]
        if messages:
            return validation_error(messages[0])
        # e.g. "Missing required query parameter 'corpus' for path ...": names, never values.
        return RagmeshError(ErrorCode.INVALID_ARGUMENT, exc.detail or "invalid request")
    if isinstance(exc, HTTPException):
        if exc.status_code == 413:
            return RagmeshError(ErrorCode.BODY_TOO_LARGE, "request body is too large")
        if exc.status_code == 400:
            return RagmeshError(ErrorCode.MALFORMED_BODY, "request body is not valid JSON")
        if exc.status_code == 401:
            return RagmeshError(ErrorCode.UNAUTHENTICATED, "authentication required")
        if exc.status_code == 403:
            return RagmeshError(ErrorCode.PERMISSION_DENIED, "permission denied")
        if exc.status_code == 429:
            return RagmeshError(ErrorCode.RATE_LIMITED, "too many requests")
        if exc.status_code == 415:
            return RagmeshError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, "unsupported media type")
        if 400 <= exc.status_code < 500:
            return RagmeshError(ErrorCode.INVALID_ARGUMENT, "invalid request")
    return RagmeshError(ErrorCode.INTERNAL, "internal error")


def www_authenticate(*, has_credentials: bool, description: str = "", resource_metadata: str = "") -> str:
    """RFC 6750: no token -> just the challenge; a token that failed -> ``error="invalid_token"`` and
    why. ``resource_metadata`` (RFC 9728) points OAuth-capable clients at the authorization server."""
    challenge = 'Bearer realm="ragmesh"'
    if has_credentials:
        challenge += ', error="invalid_token"'
        if description:
            challenge += f', error_description="{_quotable(description)}"'
    if resource_metadata:
        challenge += f', resource_metadata="{_quotable(resource_metadata)}"'
    return challenge


# A store or a downstream service that is down is usually back within seconds (a restart), so a
# client that honours Retry-After retries soon rather than never.
UNAVAILABLE_RETRY_AFTER_S = 2


def _quotable(text: str) -> str:
    """Printable ASCII without quote or backslash: safe inside a quoted header parameter."""
    return "".join(ch for ch in text if 32 <= ord(ch) < 127 and ch not in {'"', "\\"})


def retry_after(error: RagmeshError) -> str | None:
    if error.code is ErrorCode.RATE_LIMITED and "retry_after_s" in error.details:
        return str(max(1, int(float(error.details["retry_after_s"]) + 0.999)))
    if error.code in (ErrorCode.UNAVAILABLE, ErrorCode.NO_ACTIVE_INDEX):
        return str(UNAVAILABLE_RETRY_AFTER_S)
    return None


def described(request: Request, exc: Exception) -> tuple[RagmeshError, dict[str, str]]:
    """The error an exception stands for and the headers its answer needs; logs what deserves it,
    and marks the request's server span with it."""
    error = as_ragmesh_error(exc)
    mark_request_failed(error.code.value, error.message, server_fault=error.http_status >= 500)
    fields = {
        "code": error.code.value,
        "status": error.http_status,
        "path_template": request.scope.get("path_template"),
    }
    if error.code is ErrorCode.INTERNAL and not isinstance(exc, RagmeshError):
        log.error("unhandled error", exc_info=exc, extra={"fields": fields})
    elif error.http_status >= 500:
        log.warning("request failed", extra={"fields": fields})
    headers = {}
    if isinstance(exc, HTTPException) and exc.headers:
        headers.update(exc.headers)  # e.g. Allow on 405
    if error.code is ErrorCode.UNAUTHENTICATED:
        headers["WWW-Authenticate"] = www_authenticate(
            has_credentials="authorization" in request.headers, description=error.message)
    if (seconds := retry_after(error)) is not None:
        headers["Retry-After"] = seconds
    return error, headers


def error_response(request: Request, exc: Exception) -> Response:
    error, headers = described(request, exc)
    return Response(
        content=error.to_body(request_id_of(request.scope)),
        status_code=error.http_status,
        headers=headers,
        media_type="application/json",
    )


BodyShape = Callable[[RagmeshError, "str | None"], Any]


def error_responder(shapes: dict[str, BodyShape]) -> Callable[[Request, Exception], Response]:
    """The app's error handler: ragmesh's body, or another protocol's for the paths it owns (the
    OpenAI-compatible /v1 routes), routing failures (404/405) included."""

    def respond(request: Request, exc: Exception) -> Response:
        path = request.scope.get("path", "")
        shape = next((make for prefix, make in shapes.items() if path.startswith(prefix)), None)
        if shape is None:
            return error_response(request, exc)
        error, headers = described(request, exc)
        return Response(content=shape(error, request_id_of(request.scope)), status_code=error.http_status,
                        headers=headers, media_type="application/json")

    return respond


async def send_error(
    scope: Any,
    send: Any,
    error: RagmeshError,
    *,
    has_credentials: bool,
    body: dict[str, Any] | None = None,
    resource_metadata: str = "",
    headers: dict[str, str] | None = None,
) -> None:
    """The same error answer as :func:`error_response`, sent from plain ASGI code (the /mcp mount,
    the host check); ``body`` replaces the standard one (the /mcp edge adds a JSON-RPC error)."""
    mark_request_failed(error.code.value, error.message, server_fault=error.http_status >= 500)
    out = {"content-type": "application/json", **(headers or {})}
    if error.code is ErrorCode.UNAUTHENTICATED:
        out["www-authenticate"] = www_authenticate(
            has_credentials=has_credentials, description=error.message, resource_metadata=resource_metadata)
    if (seconds := retry_after(error)) is not None:
        out["retry-after"] = seconds
    encoded = msgspec.json.encode(body if body is not None else error.to_body(request_id_of(scope)))
    out["content-length"] = str(len(encoded))
    await send({"type": "http.response.start", "status": error.http_status,
                "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in out.items()]})
    await send({"type": "http.response.body", "body": encoded})
