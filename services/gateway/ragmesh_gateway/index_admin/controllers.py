"""Internal index routes: build, promote, rollback, status, remove (admin callers only)."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get, post
from litestar.params import Parameter

from ragmesh_common.telemetry import request_id_var

from ragmesh_gateway.access.ports import Caller, RouteClass
from ragmesh_gateway.index_admin.presenters import (
    build_response,
    corpus_spec,
    promote_response,
    remove_response,
    status_response,
)
from ragmesh_gateway.index_admin.schemas import (
    BuildRequest,
    BuildResponse,
    IndexStatusResponse,
    PromoteRequest,
    PromoteResponse,
    RemoveRequest,
    RemoveResponse,
    RollbackRequest,
)
from ragmesh_gateway.index_admin.service import IndexAdminService
from ragmesh_gateway.web.errors import error_responses

API = "/api/rag/v1"


class IndexAdminController(Controller):
    path = f"{API}/internal/index"
    tags = ["internal"]
    opt = {"route_class": RouteClass.ADMIN}

    @post(
        "/build",
        status_code=200,
        summary="Build a candidate index version",
        responses=error_responses(400, 401, 403, 404, 409, 413, 415, 422, 429, 503, 504),
    )
    async def build(self, data: BuildRequest, caller: Caller, admin: IndexAdminService) -> BuildResponse:
        result = await admin.build(corpus_spec(data), force=data.force, reason=data.reason, caller=caller)
        return build_response(result, request_id_var.get())

    @post(
        "/promote",
        status_code=200,
        summary="Serve an index version",
        responses=error_responses(400, 401, 403, 404, 409, 413, 415, 422, 429, 503, 504),
    )
    async def promote(
        self, data: PromoteRequest, caller: Caller, admin: IndexAdminService
    ) -> PromoteResponse:
        result = await admin.promote(data.corpus, data.index_version, reason=data.reason, caller=caller)
        return promote_response(result, request_id_var.get())

    @post(
        "/rollback",
        status_code=200,
        summary="Serve the previous index version again",
        responses=error_responses(400, 401, 403, 404, 409, 413, 415, 422, 429, 503, 504),
    )
    async def rollback(
        self, data: RollbackRequest, caller: Caller, admin: IndexAdminService
    ) -> PromoteResponse:
        result = await admin.rollback(data.corpus, reason=data.reason, caller=caller)
        return promote_response(result, request_id_var.get())

    @get(
        "/status", summary="Index versions of one corpus",
        responses=error_responses(400, 401, 403, 404, 429, 503, 504),
    )
    async def status(
        self,
        caller: Caller,
        admin: IndexAdminService,
        corpus: Annotated[str, Parameter(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f]+$",
                                         description="Corpus id")],
    ) -> IndexStatusResponse:
        return status_response(await admin.status(corpus, caller), request_id_var.get())

    @post(
        "/remove",
        status_code=200,
        summary="Remove a corpus: retire its versions, delete its alias and collections (rag:admin)",
        responses=error_responses(400, 401, 403, 404, 413, 415, 422, 429, 503, 504),
    )
    async def remove(self, data: RemoveRequest, caller: Caller, admin: IndexAdminService) -> RemoveResponse:
        result = await admin.remove(data.corpus, dry_run=data.dry_run, reason=data.reason, caller=caller)
        return remove_response(result, request_id_var.get())
