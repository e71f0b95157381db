"""The edge checks (rate limit, authentication, scope, strict body) and the caller they admit.

``Ragmesh-Auth: disabled; token-not-checked`` answers a request that shows a token while
authentication is disabled (:func:`authenticate`, also used by the /mcp edge).

Names no feature: the composition root hands controllers their services (``GatewayServices.dependencies``)
and puts the :class:`EdgeGate` in the app state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from litestar import Request
from litestar.datastructures import State

from ragmesh_gateway.access.ports import Authenticator, Caller, RateLimiter, RequestInfo, RouteClass
from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.web.body import strict_json_body
from ragmesh_gateway.web.request_context import EDGE_HEADERS


@dataclass(frozen=True, slots=True)
class EdgeGate:
    """What the edge checks ask, in this order: the rate limiter, then the authenticator."""

    authenticator: Authenticator
    rate_limiter: RateLimiter


# App-state key of the EdgeGate (the composition root puts it there).
EDGE_GATE = "ragmesh_edge_gate"

# Scope-state key of the caller the edge checks established for this request.
CALLER = "ragmesh_caller"


async def edge_checks(request: Request) -> None:
    """``before_request`` hook, in this order: rate limit, authenticate, scope, then the strict body.

    Runs before Litestar resolves dependencies or parses the body, so a flood of requests or of bad
    bodies spends a rate-limit budget and proves a token before any other work is done.
    """
    if "route_class" in request.route_handler.opt:
        caller = await checked_caller(request, request.app.state[EDGE_GATE])
        request.scope.setdefault("state", {})[CALLER] = caller
    await strict_json_body(request)


async def provide_caller(request: Request, state: State) -> Caller:
    """The caller :func:`edge_checks` admitted (checked here for a route without a route class)."""
    caller = request.scope.get("state", {}).get(CALLER)
    return caller if caller is not None else await checked_caller(request, state[EDGE_GATE])


async def checked_caller(request: Request, gate: EdgeGate) -> Caller:
    """Rate limit, then authenticate, then the ``scope`` in the handler's ``opt``."""
    opt = request.route_handler.opt
    client = request.client
    info = RequestInfo(headers=request.headers, client_host=client.host if client else None)
    await admit(gate.rate_limiter, info, RouteClass(opt.get("route_class", RouteClass.READ)), request.scope)
    caller = await authenticate(gate.authenticator, info, request.scope)
    if opt.get("scope"):
        # One scope, or a tuple of scopes any one of which will do.
        scopes = opt["scope"] if isinstance(opt["scope"], tuple) else (opt["scope"],)
        caller.require(*(Scope(s) for s in scopes))
    return caller


async def admit(limiter: RateLimiter, info: RequestInfo, route_class: RouteClass, scope: Any) -> None:
    """Spend the sender's budget before anything else; the response carries the RateLimit headers."""
    decision = await limiter.admit(info, route_class)
    if decision.headers:
        scope.setdefault("state", {}).setdefault(EDGE_HEADERS, {}).update(decision.headers)
    if not decision.allowed:
        raise decision.refusal()


# With authentication disabled, a request that shows a token gets this header: the token was not
# checked, and every caller is the same local caller (RAGMESH_AUTH_MODE=tokens checks tokens).
AUTH_HEADER = "Ragmesh-Auth"
TOKEN_NOT_CHECKED = "disabled; token-not-checked"


async def authenticate(authenticator: Authenticator, info: RequestInfo, scope: Any) -> Caller:
    """The caller behind the request; the response says so when a token it showed went unchecked."""
    caller = await authenticator.authenticate(info)
    if caller.token_unchecked:
        scope.setdefault("state", {}).setdefault(EDGE_HEADERS, {})[AUTH_HEADER] = TOKEN_NOT_CHECKED
    return caller
