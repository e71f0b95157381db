"""Token authentication, corpus ACLs and Redis rate limits behind the access ports.

Wires the security layer (``ragmesh_gateway.security``: token store, grants, rate limiter) into
the :class:`Authenticator` and :class:`RateLimiter` ports. The PostgreSQL pool is opened in the
app's lifespan (``SecurityStores.start``), because it needs the server's event loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.expiring import Expiring
from ragmesh_common.pg import create_pool

from ragmesh_gateway.access.client_address import bearer_key, client_key
from ragmesh_gateway.access.corpus_access import AccessStore
from ragmesh_gateway.access.ports import Authenticator, Caller, RateDecision, RateLimiter, RequestInfo, RouteClass
from ragmesh_gateway.access.ratelimit import Limit, rate_limit_headers
from ragmesh_gateway.access.ratelimit import RateLimiter as RedisBuckets
from ragmesh_gateway.access.token_store import TokenStore
from ragmesh_gateway.access.tokens import Scope, unauthenticated
from ragmesh_gateway.catalog import CorpusCatalog, CorpusDirectory
from ragmesh_gateway.store.database import GATEWAY_SCHEMA, migrate

# What a caller without a token may do when anonymous access is on: the site's chat, over public
# corpora only. Everything else asks for a token (401).
ANONYMOUS_SCOPES = frozenset({Scope.ANSWER.value})
# Limits of requests without a token (site traffic), per client address: "anonymous.<route class>"
# when configured, else "anonymous" (one budget for all of them), else the route class's own.
ANONYMOUS_LIMIT = "anonymous"


class SecurityStores:
    """Token and grant stores over one PostgreSQL pool (schema ``gateway``), migrated at start."""

    def __init__(self, postgres_url: str, *, schema: str = GATEWAY_SCHEMA) -> None:
        self._url = postgres_url
        self._schema = schema
        self._pool = None
        self.tokens: TokenStore | None = None
        self.access: AccessStore | None = None

    async def start(self) -> None:
        self._pool = await create_pool(self._url, schema=self._schema)
        await migrate(self._pool, schema=self._schema)
        self.tokens = TokenStore(self._pool)
        self.access = AccessStore(self._pool)

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.close()
            self._pool = None

    def ready(self) -> tuple[TokenStore, AccessStore]:
        if self.tokens is None or self.access is None:
            raise RagmeshError(ErrorCode.UNAVAILABLE, "token store is not started")
        return self.tokens, self.access


class TokenAuthenticator(Authenticator):
    """``Authorization: Bearer rmk_...`` -> a caller with the token's scopes and readable corpora."""

    def __init__(
        self,
        stores: SecurityStores,
        catalog: CorpusCatalog,
        directory: CorpusDirectory,
        *,
        allow_anonymous: bool,
        trusted_proxies: list[str],
        visibility_ttl_s: float = 5.0,
    ) -> None:
        self._stores = stores
        self._catalog = catalog
        self._directory = directory
        self._allow_anonymous = allow_anonymous
        self._trusted_proxies = list(trusted_proxies)
        # (corpus, visibility) of every corpus: it changes only on promotion, so it is kept briefly.
        self._visibility = Expiring(self._list_visibility, ttl_s=visibility_ttl_s)

    async def _list_visibility(self) -> list[tuple[str, str]]:
        served = tuple(sorted(await self._directory.corpus_ids()))
        return [(c.corpus, c.visibility) for c in await self._catalog.list_corpora(served)]

    async def authenticate(self, request: RequestInfo) -> Caller:
        tokens, access = self._stores.ready()
        bearer = request.headers.get("authorization")
        principal = await tokens.authenticate(bearer) if bearer else None
        if principal is None and not self._allow_anonymous:
            raise unauthenticated()
        readable = await access.readable_corpora(principal, await self._visibility.get())
        if principal is None:
            return Caller(
                principal="anonymous",
                readable_corpora=frozenset(readable),
                scopes=ANONYMOUS_SCOPES,
                authenticated=False,
            )
        return Caller(
            principal=principal.client_id,
            readable_corpora=frozenset(readable),
            scopes=frozenset(s.value for s in principal.scopes),
        )


class RedisRateLimit(RateLimiter):
    """Token buckets in Redis per (limit class, sender), checked before authentication.

    The sender is the bearer token the request shows (hashed), or its client address when it shows
    none. Requests without a token spend ``anonymous.<route class>``, else ``anonymous``, else their
    route class's budget, whichever is configured first. Classes without a limit (and no ``*``
    fallback) are not limited.
    """

    def __init__(
        self, buckets: RedisBuckets, limits: dict[str, Limit], *, trusted_proxies: Sequence[str] = ()
    ) -> None:
        self._buckets = buckets
        self._limited = set(limits)
        self._trusted_proxies = list(trusted_proxies)

    async def admit(self, request: RequestInfo, route_class: RouteClass) -> RateDecision:
        authorization = _header(request, "authorization")
        if authorization:
            sender, candidates = bearer_key(authorization), [route_class.value]
        else:
            sender = client_key(request.client_host, request.headers, self._trusted_proxies)
            candidates = [f"{ANONYMOUS_LIMIT}.{route_class.value}", ANONYMOUS_LIMIT, route_class.value]
        limit_class = next((c for c in candidates if c in self._limited), candidates[-1])
        if limit_class not in self._limited and "*" not in self._limited:
            return RateDecision(allowed=True)
        decision = await self._buckets.check(limit_class, sender)
        headers = rate_limit_headers(decision)
        return RateDecision(
            allowed=decision.allowed, headers=headers, retry_after_s=int(headers.get("Retry-After", 0))
        )


def _header(request: RequestInfo, name: str) -> str | None:
    value = request.headers.get(name)
    if value is None:  # a plain dict from a test or the MCP context: match case-insensitively
        value = next((v for k, v in request.headers.items() if k.lower() == name), None)
    return value
