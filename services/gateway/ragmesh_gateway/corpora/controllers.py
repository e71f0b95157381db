"""GET /corpora and GET /stats."""

from __future__ import annotations

from litestar import Controller, get

from ragmesh_common.telemetry import request_id_var

from ragmesh_gateway.access.ports import Caller, RouteClass
from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.corpora.presenters import corpora_response, stats_response
from ragmesh_gateway.corpora.schemas import CorporaResponse, StatsResponse
from ragmesh_gateway.corpora.service import CorpusService
from ragmesh_gateway.web.errors import error_responses

API = "/api/rag/v1"


class CorporaController(Controller):
    path = API
    tags = ["corpora"]
    opt = {"route_class": RouteClass.READ, "scope": Scope.READ}

    @get("/corpora", summary="Corpora the caller may read", responses=error_responses(401, 429, 503))
    async def list_corpora(self, caller: Caller, corpora: CorpusService) -> CorporaResponse:
        return corpora_response(await corpora.list_corpora(caller), request_id_var.get())

    @get(
        "/stats",
        summary="Index-wide numbers over the readable corpora",
        responses=error_responses(401, 429, 503),
    )
    async def stats(self, caller: Caller, corpora: CorpusService) -> StatsResponse:
        return stats_response(await corpora.stats(caller), request_id_var.get())
