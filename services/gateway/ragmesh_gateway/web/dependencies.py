"""Litestar dependency providers: the caller (authenticated, rate-limited) and the services."""

from __future__ import annotations

from litestar import Request
from litestar.datastructures import State

from ragmesh_gateway.access import Caller, RequestInfo, RouteClass
from ragmesh_gateway.chat.service import ChatService
from ragmesh_gateway.corpora.service import CorpusService
from ragmesh_gateway.deps import GatewayServices, services_of
from ragmesh_gateway.files.service import FileService
from ragmesh_gateway.health.service import ReadinessService
from ragmesh_gateway.index_admin.service import IndexAdminService
from ragmesh_gateway.search.service import SearchService
from ragmesh_gateway.security.tokens import Scope


async def provide_caller(request: Request, state: State) -> Caller:
    """Who is calling, checked against the ``scope`` and ``route_class`` in the handler's ``opt``."""
    opt = request.route_handler.opt
    services = services_of(state)
    client = request.client
    caller = await services.authenticator.authenticate(
        RequestInfo(headers=request.headers, client_host=client.host if client else None)
    )
    if opt.get("scope"):
        caller.require(Scope(opt["scope"]))
    await services.rate_limiter.check(caller, RouteClass(opt.get("route_class", RouteClass.READ)))
    return caller


def provide_services(state: State) -> GatewayServices:
    return services_of(state)


def provide_search(state: State) -> SearchService:
    return services_of(state).search


def provide_chat(state: State) -> ChatService:
    return services_of(state).chat


def provide_corpora(state: State) -> CorpusService:
    return services_of(state).corpora


def provide_files(state: State) -> FileService:
    return services_of(state).files


def provide_index_admin(state: State) -> IndexAdminService:
    return services_of(state).index_admin


def provide_readiness(state: State) -> ReadinessService:
    return services_of(state).readiness
