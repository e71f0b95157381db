"""One error taxonomy for the whole mesh.

Domain code raises :class:`RagmeshError` with a stable :class:`ErrorCode`. The gRPC layer maps a
code to a gRPC status once (``ragmesh_common.rpc``) and the gateway maps it to an HTTP status and a
JSON body once; nothing else translates errors. Codes are part of the public contract: never
rename one.
"""

from __future__ import annotations

import enum
from typing import Any


class ErrorCode(enum.StrEnum):
    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    QUERY_EMPTY = "QUERY_EMPTY"
    QUERY_TOO_LONG = "QUERY_TOO_LONG"
    TOP_K_OUT_OF_RANGE = "TOP_K_OUT_OF_RANGE"
    UNKNOWN_FIELD = "UNKNOWN_FIELD"
    MALFORMED_BODY = "MALFORMED_BODY"
    # Not parseable as HTTP at all (answered by the HTTP server itself).
    MALFORMED_REQUEST = "MALFORMED_REQUEST"
    # Text that cannot be stored or shown safely: NUL, other control characters, lone surrogates.
    INVALID_CHARACTER = "INVALID_CHARACTER"
    UNSUPPORTED_MEDIA_TYPE = "UNSUPPORTED_MEDIA_TYPE"
    BODY_TOO_LARGE = "BODY_TOO_LARGE"
    MALFORMED_CHUNK_ID = "MALFORMED_CHUNK_ID"
    TOO_MANY_IDS = "TOO_MANY_IDS"
    AMBIGUOUS_LIBRARY = "AMBIGUOUS_LIBRARY"
    NOT_FOUND = "NOT_FOUND"
    ROUTE_NOT_FOUND = "ROUTE_NOT_FOUND"
    METHOD_NOT_ALLOWED = "METHOD_NOT_ALLOWED"
    MISDIRECTED_REQUEST = "MISDIRECTED_REQUEST"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    # A corpus root outside the folders the indexer may read (RAGMESH_CORPUS_ROOTS).
    ROOT_NOT_ALLOWED = "ROOT_NOT_ALLOWED"
    RATE_LIMITED = "RATE_LIMITED"
    INDEX_VERSION_GONE = "INDEX_VERSION_GONE"
    NO_ACTIVE_INDEX = "NO_ACTIVE_INDEX"
    CONFLICT = "CONFLICT"
    VALIDATION_FAILED = "VALIDATION_FAILED"
    BUILD_FAILED = "BUILD_FAILED"
    UNAVAILABLE = "UNAVAILABLE"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    CANCELLED = "CANCELLED"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    INTERNAL = "INTERNAL"


# code -> (HTTP status, gRPC status name). The gRPC name is resolved in ragmesh_common.rpc so
# that this module stays free of grpc imports.
_STATUS: dict[ErrorCode, tuple[int, str]] = {
    ErrorCode.INVALID_ARGUMENT: (400, "INVALID_ARGUMENT"),
    ErrorCode.QUERY_EMPTY: (400, "INVALID_ARGUMENT"),
    ErrorCode.QUERY_TOO_LONG: (400, "INVALID_ARGUMENT"),
    ErrorCode.TOP_K_OUT_OF_RANGE: (400, "INVALID_ARGUMENT"),
    ErrorCode.UNKNOWN_FIELD: (400, "INVALID_ARGUMENT"),
    ErrorCode.MALFORMED_BODY: (400, "INVALID_ARGUMENT"),
    ErrorCode.MALFORMED_REQUEST: (400, "INVALID_ARGUMENT"),
    ErrorCode.INVALID_CHARACTER: (400, "INVALID_ARGUMENT"),
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: (415, "INVALID_ARGUMENT"),
    ErrorCode.BODY_TOO_LARGE: (413, "INVALID_ARGUMENT"),
    ErrorCode.MALFORMED_CHUNK_ID: (400, "INVALID_ARGUMENT"),
    ErrorCode.TOO_MANY_IDS: (400, "INVALID_ARGUMENT"),
    ErrorCode.AMBIGUOUS_LIBRARY: (400, "INVALID_ARGUMENT"),
    ErrorCode.NOT_FOUND: (404, "NOT_FOUND"),
    ErrorCode.ROUTE_NOT_FOUND: (404, "NOT_FOUND"),
    ErrorCode.METHOD_NOT_ALLOWED: (405, "UNIMPLEMENTED"),
    ErrorCode.MISDIRECTED_REQUEST: (421, "INVALID_ARGUMENT"),  # a Host name this server does not serve
    ErrorCode.UNAUTHENTICATED: (401, "UNAUTHENTICATED"),
    ErrorCode.PERMISSION_DENIED: (403, "PERMISSION_DENIED"),
    ErrorCode.ROOT_NOT_ALLOWED: (403, "PERMISSION_DENIED"),
    ErrorCode.RATE_LIMITED: (429, "RESOURCE_EXHAUSTED"),
    ErrorCode.INDEX_VERSION_GONE: (410, "FAILED_PRECONDITION"),
    ErrorCode.NO_ACTIVE_INDEX: (503, "FAILED_PRECONDITION"),
    ErrorCode.CONFLICT: (409, "ABORTED"),
    ErrorCode.VALIDATION_FAILED: (422, "FAILED_PRECONDITION"),
    ErrorCode.BUILD_FAILED: (422, "FAILED_PRECONDITION"),
    ErrorCode.UNAVAILABLE: (503, "UNAVAILABLE"),
    ErrorCode.DEADLINE_EXCEEDED: (504, "DEADLINE_EXCEEDED"),
    ErrorCode.CANCELLED: (499, "CANCELLED"),
    ErrorCode.RUNTIME_ERROR: (502, "UNAVAILABLE"),
    ErrorCode.INTERNAL: (500, "INTERNAL"),
}

# gRPC status name -> code, for errors that did not come from a ragmesh server (a dead peer,
# a deadline hit in the channel).
_FROM_GRPC: dict[str, ErrorCode] = {
    "INVALID_ARGUMENT": ErrorCode.INVALID_ARGUMENT,
    "NOT_FOUND": ErrorCode.NOT_FOUND,
    "UNAUTHENTICATED": ErrorCode.UNAUTHENTICATED,
    "PERMISSION_DENIED": ErrorCode.PERMISSION_DENIED,
    "RESOURCE_EXHAUSTED": ErrorCode.RATE_LIMITED,
    "FAILED_PRECONDITION": ErrorCode.INVALID_ARGUMENT,
    "UNAVAILABLE": ErrorCode.UNAVAILABLE,
    "DEADLINE_EXCEEDED": ErrorCode.DEADLINE_EXCEEDED,
    "CANCELLED": ErrorCode.CANCELLED,
}


class RagmeshError(Exception):
    """An expected failure with a stable machine-readable code.

    ``message`` is safe to show a client: it never holds document text, tokens or a full query.
    """

    def __init__(self, code: ErrorCode, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = ErrorCode(code)
        self.message = message
        self.details = details or {}

    @property
    def http_status(self) -> int:
        return _STATUS[self.code][0]

    @property
    def grpc_status_name(self) -> str:
        return _STATUS[self.code][1]

    def to_body(self, request_id: str | None = None) -> dict[str, Any]:
        body: dict[str, Any] = {"code": self.code.value, "message": self.message}
        if self.details:
            body["details"] = self.details
        if request_id:
            body["request_id"] = request_id
        return body

    def __repr__(self) -> str:
        return f"RagmeshError({self.code.value}, {self.message!r})"


def code_from_grpc_status(status_name: str) -> ErrorCode:
    return _FROM_GRPC.get(status_name, ErrorCode.INTERNAL)


def invalid(message: str, code: ErrorCode = ErrorCode.INVALID_ARGUMENT, **details: Any) -> RagmeshError:
    return RagmeshError(code, message, details or None)
