"""Index administration results -> DTOs (same field names, plus the request id)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

import msgspec

from ragmesh_gateway.index_admin.ports import BuildResult, CorpusSpec, IndexStatus, PromoteResult, RemoveResult
from ragmesh_gateway.index_admin.schemas import (
    BuildRequest,
    BuildResponse,
    IndexStatusResponse,
    PromoteResponse,
    RemoveResponse,
)

T = TypeVar("T", bound=msgspec.Struct)


def _with_request_id(result: Any, type_: type[T], request_id: str, **overrides: Any) -> T:
    return msgspec.convert({**dataclasses.asdict(result), **overrides, "request_id": request_id}, type_)


def build_response(result: BuildResult, request_id: str) -> BuildResponse:
    return _with_request_id(result, BuildResponse, request_id)


def promote_response(result: PromoteResult, request_id: str) -> PromoteResponse:
    return _with_request_id(result, PromoteResponse, request_id)


def status_response(result: IndexStatus, request_id: str) -> IndexStatusResponse:
    return _with_request_id(
        result, IndexStatusResponse, request_id, active_version=result.active_version or None
    )


def remove_response(result: RemoveResult, request_id: str) -> RemoveResponse:
    return _with_request_id(result, RemoveResponse, request_id)


def corpus_spec(request: BuildRequest) -> CorpusSpec:
    """The corpus a build request describes: CorpusSpec's fields, by name (lists copied)."""
    values = {f.name: getattr(request, f.name) for f in dataclasses.fields(CorpusSpec)}
    return CorpusSpec(**{name: list(v) if isinstance(v, list) else v for name, v in values.items()})
