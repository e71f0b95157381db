"""The one mapping between the error taxonomy and gRPC status, both directions."""

from __future__ import annotations

import json

import grpc

from ragmesh_common.errors import ErrorCode, RagmeshError, code_from_grpc_status

CODE_KEY = "ragmesh-error-code"
DETAILS_KEY = "ragmesh-error-details"


def grpc_status(error: RagmeshError) -> grpc.StatusCode:
    return grpc.StatusCode[error.grpc_status_name]


def trailing_metadata(error: RagmeshError) -> tuple[tuple[str, str], ...]:
    meta = [(CODE_KEY, error.code.value)]
    if error.details:
        meta.append((DETAILS_KEY, json.dumps(error.details, ensure_ascii=True)))
    return tuple(meta)


def from_rpc_error(exc: grpc.aio.AioRpcError | grpc.RpcError, *, peer: str = "") -> RagmeshError:
    """Turn a failed call into a RagmeshError, keeping a ragmesh server's own code."""
    meta = dict(exc.trailing_metadata() or ()) if hasattr(exc, "trailing_metadata") else {}
    code = meta.get(CODE_KEY)
    details = {}
    if DETAILS_KEY in meta:
        try:
            details = json.loads(meta[DETAILS_KEY])
        except ValueError:
            details = {}
    status = exc.code()
    if code and code in ErrorCode.__members__:
        return RagmeshError(ErrorCode(code), exc.details() or code, details)
    mapped = code_from_grpc_status(status.name if status else "UNKNOWN")
    message = f"{peer or 'upstream'} failed: {status.name if status else 'UNKNOWN'}"
    return RagmeshError(mapped if mapped != ErrorCode.INVALID_ARGUMENT else ErrorCode.INVALID_ARGUMENT, message)
