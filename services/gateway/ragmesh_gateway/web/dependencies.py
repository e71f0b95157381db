"""The edge checks (rate limit, authentication, scope, strict body) and the dependency providers."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.datastructures import State

from ragmesh_gateway.access import Caller, RateLimiter, RequestInfo, RouteClass
from ragmesh_gateway.chat.service import ChatService
from ragmesh_gateway.corpora.service import CorpusService
from ragmesh_gateway.deps import GatewayServices, services_of
from ragmesh_gateway.files.service import FileService
from ragmesh_gateway.health.service import ReadinessService
from ragmesh_gateway.index_admin.service import IndexAdminService
from ragmesh_gateway.search.service import SearchService
from ragmesh_gateway.security.tokens import Scope
from ragmesh_gateway.web.body import strict_json_body
from ragmesh_gateway.web.request_context import RATE_LIMIT_HEADERS


# Scope-state key of the caller the edge checks established for this request.
CALLER = "ragmesh_caller"


async def edge_checks(request: Request) -> None:
    """``before_request`` hook, in this order: rate limit, authenticate, scope, then the strict body.

    Runs before Litestar resolves dependencies or parses the body, so a flood of requests or of bad
    bodies spends a rate-limit budget and proves a token before any other work is done.
    """
    if "route_class" in request.route_handler.opt:
        caller = await checked_caller(request, services_of(request.app.state))
        request.scope.setdefault("state", {})[CALLER] = caller
    await strict_json_body(request)


async def provide_caller(request: Request, state: State) -> Caller:
    """The caller :func:`edge_checks` admitted (checked here for a route without a route class)."""
    caller = request.scope.get("state", {}).get(CALLER)
    return caller if caller is not None else await checked_caller(request, services_of(state))


async def checked_caller(request: Request, services: GatewayServices) -> Caller:
    """Rate limit, then authenticate, then the ``scope`` in the handler's ``opt``."""
    opt = request.route_handler.opt
    client = request.client
    info = RequestInfo(headers=request.headers, client_host=client.host if client else None)
    await admit(services.rate_limiter, info, RouteClass(opt.get("route_class", RouteClass.READ)), request.scope)
    caller = await services.authenticator.authenticate(info)
    if opt.get("scope"):
        # One scope, or a tuple of scopes any one of which will do.
        scopes = opt["scope"] if isinstance(opt["scope"], tuple) else (opt["scope"],)
        caller.require(*(Scope(s) for s in scopes))
    return caller


async def admit(limiter: RateLimiter, info: RequestInfo, route_class: RouteClass, scope: Any) -> None:
    """Spend the sender's budget before anything else; the response carries the RateLimit headers."""
    decision = await limiter.admit(info, route_class)
    if decision.headers:
        scope.setdefault("state", {})[RATE_LIMIT_HEADERS] = dict(decision.headers)
    if not decision.allowed:
        raise decision.refusal()


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
