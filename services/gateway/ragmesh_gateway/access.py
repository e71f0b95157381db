"""Who is calling and what they may do: the ports the edge asks before any work is done.

The embedded default runs with authentication disabled (:class:`AuthDisabled`): every caller is the
local operator, may use every route and read every corpus the gateway serves. Token-based adapters
(``ragmesh_gateway.access_adapters``) plug in here without changes to controllers or services.

A caller's readable corpora are always an explicit set: retrieval denies by default, so an empty
list there means *nothing*, and "everything" has to be spelled out corpus by corpus.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Mapping
from dataclasses import dataclass

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.corpora.ports import CorpusDirectory
from ragmesh_gateway.security.tokens import Scope


class RouteClass(enum.StrEnum):
    """Groups of routes that share a rate limit."""

    SEARCH = "search"
    CHAT = "chat"
    READ = "read"
    FILES = "files"
    MCP = "mcp"
    ADMIN = "admin"


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What an authenticator may look at: the headers and the peer address of the connection."""

    headers: Mapping[str, str]
    client_host: str | None = None


@dataclass(frozen=True, slots=True)
class Caller:
    principal: str
    readable_corpora: frozenset[str] = frozenset()
    # None: every scope (authentication disabled); else the token's scopes (values of Scope).
    scopes: frozenset[str] | None = None
    # Whose budget a request spends: a token id, or the client address for anonymous callers.
    rate_key: str = "local"

    @property
    def is_admin(self) -> bool:
        return self.scopes is None or Scope.ADMIN.value in self.scopes

    def allows(self, scope: Scope) -> bool:
        return self.is_admin or scope.value in (self.scopes or ())

    def require(self, scope: Scope) -> None:
        if not self.allows(scope):
            raise RagmeshError(ErrorCode.PERMISSION_DENIED, f"this token lacks the scope {scope.value}")

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


class AuthDisabled(Authenticator):
    """Embedded default: one local operator with every scope, reading every corpus served."""

    def __init__(self, directory: CorpusDirectory) -> None:
        self._directory = directory

    async def authenticate(self, request: RequestInfo) -> Caller:
        return Caller(principal="local", readable_corpora=await self._directory.corpus_ids())


class RateLimiter(abc.ABC):
    @abc.abstractmethod
    async def check(self, caller: Caller, route_class: RouteClass) -> None:
        """Raise RagmeshError RATE_LIMITED when the caller is over its budget for this class."""


class NoRateLimit(RateLimiter):
    async def check(self, caller: Caller, route_class: RouteClass) -> None:
        return None
