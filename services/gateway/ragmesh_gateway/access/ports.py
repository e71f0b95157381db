"""Who is calling and what they may do: the ports the edge asks before any work is done.

The embedded default runs with authentication disabled (:class:`AuthDisabled`): every caller reads
every corpus the gateway serves; a loopback caller is the local operator and may use every route,
while any other caller may search, read and answer but not touch the index. Token-based adapters
(``ragmesh_gateway.access.adapters``) plug in here without changes to controllers or services.

Order at the edge: rate limit, then authenticate, then check the scope. The rate limiter runs first
so that a flood of requests (or of guessed tokens) costs one Redis call each and never reaches the
token store; it therefore knows a sender only by what the request shows (:class:`RequestInfo`).

A caller's readable corpora are always an explicit set: retrieval denies by default, so an empty
list there means *nothing*, and "everything" has to be spelled out corpus by corpus.
"""

from __future__ import annotations

import abc
import enum
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.catalog import CorpusDirectory


class RouteClass(enum.StrEnum):
    """Groups of routes that share a rate limit."""

    SEARCH = "search"
    CHAT = "chat"
    FEEDBACK = "feedback"  # ratings of answers: anonymous site traffic, so a bucket of its own
    READ = "read"
    FILES = "files"
    MCP = "mcp"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What an authenticator may look at: the headers and the peer address of the connection."""

    headers: Mapping[str, str]
    client_host: str | None = None

    @property
    def carries_token(self) -> bool:
        """An ``Authorization`` header (``Bearer rmk_...``, the one way a token reaches the gateway).

        The edge passes Litestar's case-insensitive ``Headers``; only a plain dict (a test's) is
        searched name by name, so a request without a token costs one lookup."""
        if self.headers.get("authorization") is not None:
            return True
        return isinstance(self.headers, dict) and any(name.lower() == "authorization" for name in self.headers)


@dataclass(frozen=True, slots=True)
class Caller:
    principal: str
    readable_corpora: frozenset[str] = frozenset()
    # None: every scope (authentication disabled); else the token's scopes (values of Scope).
    scopes: frozenset[str] | None = None
    # False for a caller without a token (anonymous site traffic): a scope it lacks asks for a
    # token (401), where an authenticated caller lacking it is refused (403).
    authenticated: bool = True
    # Why a scope this caller lacks is refused, when "this token lacks the scope" is not the reason.
    denial: str = ""
    # The request showed a token that nobody checked (authentication disabled): the response says so.
    token_unchecked: bool = False

    @property
    def is_admin(self) -> bool:
        return self.scopes is None or Scope.ADMIN.value in self.scopes

    def allows(self, scope: Scope) -> bool:
        return self.is_admin or scope.value in (self.scopes or ())

    def require(self, scope: Scope, *alternatives: Scope) -> None:
        """Refuse unless the caller holds ``scope`` or one of the ``alternatives``."""
        if any(self.allows(s) for s in (scope, *alternatives)):
            return
        if not self.authenticated:
            raise RagmeshError(ErrorCode.UNAUTHENTICATED, "this route needs a bearer token")
        if self.denial:
            raise RagmeshError(ErrorCode.PERMISSION_DENIED, self.denial)
        names = " or ".join(s.value for s in (scope, *alternatives))
        raise RagmeshError(ErrorCode.PERMISSION_DENIED, f"this token lacks the scope {names}")

    def can_read(self, corpus: str) -> bool:
        return corpus in self.readable_corpora

    @property
    def reads_nothing(self) -> bool:
        """Nothing to ask downstream for: the answer is empty without a call."""
        return not self.readable_corpora

    def readable_list(self) -> list[str]:
        """The ACL as retrieval applies it (default deny)."""
        return sorted(self.readable_corpora)


class Authenticator(abc.ABC):
    @abc.abstractmethod
    async def authenticate(self, request: RequestInfo) -> Caller:
        """The caller behind this request; raises RagmeshError UNAUTHENTICATED when it has none."""


# What a caller from another host may do while authentication is disabled: use the API, never the
# index routes (build, promote, roll back), which would let anyone on the network replace what it serves.
REMOTE_SCOPES_WITHOUT_AUTH = frozenset({Scope.SEARCH.value, Scope.READ.value, Scope.ANSWER.value})
LOOPBACK_ONLY = ("authentication is disabled (RAGMESH_AUTH_MODE=disabled), so internal routes answer "
                 "loopback callers only; use tokens to administer the index from elsewhere")


def is_loopback(host: str | None) -> bool:
    if host is None:
        return False
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)  # ::ffff:127.0.0.1 from a dual-stack socket
    return (mapped or address).is_loopback


class AuthDisabled(Authenticator):
    """Embedded default: every caller reads every corpus served; a loopback caller is the local
    operator with every scope, any other caller gets :data:`REMOTE_SCOPES_WITHOUT_AUTH`. A token the
    request shows is not checked, and the caller says so (the edge answers ``Ragmesh-Auth``)."""

    def __init__(self, directory: CorpusDirectory) -> None:
        self._directory = directory

    async def authenticate(self, request: RequestInfo) -> Caller:
        readable = await self._directory.corpus_ids()
        unchecked = request.carries_token
        if is_loopback(request.client_host):
            return Caller(principal="local", readable_corpora=readable, token_unchecked=unchecked)
        return Caller(principal="local", readable_corpora=readable, scopes=REMOTE_SCOPES_WITHOUT_AUTH,
                      denial=LOOPBACK_ONLY, token_unchecked=unchecked)


@dataclass(frozen=True, slots=True)
class RateDecision:
    allowed: bool
    # RateLimit-* headers for the response (and Retry-After when refused); empty when not limited.
    headers: Mapping[str, str] = field(default_factory=dict)
    retry_after_s: int = 0

    def refusal(self) -> RagmeshError:
        return RagmeshError(ErrorCode.RATE_LIMITED, "rate limit exceeded", {"retry_after_s": self.retry_after_s})


class RateLimiter(abc.ABC):
    @abc.abstractmethod
    async def admit(self, request: RequestInfo, route_class: RouteClass) -> RateDecision:
        """Spend one request of the sender's budget for ``route_class``. Runs before authentication."""


class NoRateLimit(RateLimiter):
    async def admit(self, request: RequestInfo, route_class: RouteClass) -> RateDecision:
        return RateDecision(allowed=True)
