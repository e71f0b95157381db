"""Token-bucket rate limiting in Redis, shared by every gateway replica.

One Lua script does read-refill-take-write atomically and reads the clock with Redis ``TIME``, so
replicas with skewed clocks still share one bucket correctly. A bucket is a hash
``{prefix}:{route_class}:{key}`` with fields ``tokens`` and ``ts`` (microseconds); it is given a
``PEXPIRE`` of the time it needs to refill completely, after which a missing key and a full bucket
mean the same thing, so idle clients leave nothing behind.

Headers (:func:`rate_limit_headers`) follow the IETF httpapi draft's separate fields:
``RateLimit-Limit`` (burst size), ``RateLimit-Remaining`` (whole tokens left), ``RateLimit-Reset``
(seconds until the bucket is full again, rounded up) and ``RateLimit-Policy: <burst>;w=<seconds to
refill from empty>``; refused requests also get ``Retry-After`` (seconds until one token is back,
rounded up, at least 1).

With Redis unreachable and ``fail_open`` (the default) a request is admitted uncounted: it gets no
RateLimit-* headers (there is no budget to report, and a full one would be a lie) but
``Ragmesh-Degraded: ratelimit``, and ``ragmesh_degraded_total{component="ratelimit"}`` counts it.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING
from collections.abc import Mapping

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.metrics import DEGRADED
from ragmesh_common.telemetry import mark_request_degraded
from redis.exceptions import RedisError

from ragmesh_gateway.access.metrics import count_rate_limited

if TYPE_CHECKING:
    from redis.asyncio import Redis

log = logging.getLogger("ragmesh.gateway.ratelimit")

# KEYS[1] bucket; ARGV: rate (tokens/s), burst (capacity), cost (tokens to take).
# Returns {allowed 0|1, tokens left as a string (Lua numbers come back truncated to integers
# otherwise), microseconds until `cost` tokens are available, microseconds until full}.
TOKEN_BUCKET_LUA = """
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = tonumber(clock[1]) * 1000000 + tonumber(clock[2])
local state = redis.call('HMGET', KEYS[1], 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil or ts == nil then
  tokens = burst
  ts = now
end
local elapsed = now - ts
if elapsed < 0 then elapsed = 0 end
tokens = math.min(burst, tokens + elapsed * rate / 1000000)
local allowed = 0
local wait_us = 0
if tokens >= cost then
  tokens = tokens - cost
  allowed = 1
else
  wait_us = math.ceil((cost - tokens) * 1000000 / rate)
end
local full_us = math.ceil((burst - tokens) * 1000000 / rate)
redis.call('HSET', KEYS[1], 'tokens', string.format('%.6f', tokens), 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.floor(full_us / 1000) + 1)
return {allowed, string.format('%.6f', tokens), wait_us, full_us}
"""


@dataclass(frozen=True, slots=True)
class Limit:
    rate_per_s: float
    burst: int

    def __post_init__(self) -> None:
        if not (self.rate_per_s > 0 and math.isfinite(self.rate_per_s)) or self.burst < 1:
            raise ValueError(f"rate limit needs rate_per_s > 0 and burst >= 1, got {self}")


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    remaining: int  # whole tokens left after this request
    limit: int  # bucket size (burst)
    retry_after_s: float  # 0 when allowed; else seconds until the request would pass
    reset_s: float  # seconds until the bucket is full again
    policy_window_s: float = 0.0  # seconds to refill from empty (burst / rate)
    counted: bool = True  # False: admitted without a bucket (Redis unreachable, fail-open)


def parse_limits(spec: str) -> dict[str, Limit]:
    """``"search=10/20,chat=1/5"`` (route_class=rate_per_s/burst) -> limits; ``*`` is the fallback."""
    limits: dict[str, Limit] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        try:
            route_class, value = item.split("=", 1)
            rate, burst = value.split("/", 1)
            limits[route_class.strip()] = Limit(float(rate), int(burst))
        except ValueError as exc:
            raise ValueError(f"bad rate limit {item!r}: expected route_class=rate_per_s/burst") from exc
    return limits


class RateLimiter:
    """``await limiter.check(route_class, key)``; ``key`` is a token id or :func:`client_key`."""

    def __init__(self, redis: Redis, limits: Mapping[str, Limit], *, key_prefix: str = "ragmesh:rl",
                 fail_open: bool = True, timeout_s: float = 0.5) -> None:
        self._redis = redis
        self._limits = dict(limits)
        self._prefix = key_prefix
        # Rate limiting protects capacity, not data: with Redis down, serving (and counting the
        # degradation) beats refusing every request. Set False to refuse with UNAVAILABLE instead.
        self._fail_open = fail_open
        # redis-py retries with backoff for seconds by default; a limiter must not hold a request that long.
        self._timeout_s = timeout_s
        self._script = redis.register_script(TOKEN_BUCKET_LUA)

    def limit_for(self, route_class: str) -> Limit:
        limit = self._limits.get(route_class) or self._limits.get("*")
        if limit is None:
            raise RagmeshError(ErrorCode.INTERNAL, f"no rate limit configured for route class {route_class}")
        return limit

    def bucket_key(self, route_class: str, key: str) -> str:
        return f"{self._prefix}:{route_class}:{key}"

    async def check(self, route_class: str, key: str, *, cost: int = 1) -> Decision:
        limit = self.limit_for(route_class)
        try:
            async with asyncio.timeout(self._timeout_s):
                allowed, tokens, wait_us, full_us = await self._script(
                    keys=[self.bucket_key(route_class, key)], args=[repr(limit.rate_per_s), limit.burst, cost]
                )
        except (RedisError, OSError, TimeoutError) as exc:
            return self._unavailable(route_class, limit, exc)
        tokens_left = float(tokens.decode() if isinstance(tokens, bytes) else tokens)
        decision = Decision(
            allowed=bool(allowed),
            remaining=max(0, math.floor(tokens_left + 1e-9)),
            limit=limit.burst,
            retry_after_s=int(wait_us) / 1_000_000,
            reset_s=int(full_us) / 1_000_000,
            policy_window_s=limit.burst / limit.rate_per_s,
        )
        if not decision.allowed:
            count_rate_limited(route_class)
        return decision

    def _unavailable(self, route_class: str, limit: Limit, exc: Exception) -> Decision:
        DEGRADED.labels(service="gateway", component="ratelimit").inc()
        log.warning("rate limiter unavailable (%s); fail_open=%s", type(exc).__name__, self._fail_open)
        if not self._fail_open:
            raise RagmeshError(ErrorCode.UNAVAILABLE, "rate limiter unavailable") from exc
        mark_request_degraded(["ratelimit"])
        return Decision(allowed=True, remaining=0, limit=limit.burst, retry_after_s=0.0,
                        reset_s=0.0, policy_window_s=limit.burst / limit.rate_per_s, counted=False)


DEGRADED_HEADER = "Ragmesh-Degraded"


def rate_limit_headers(decision: Decision) -> dict[str, str]:
    if not decision.counted:
        return {DEGRADED_HEADER: "ratelimit"}
    headers = {
        "RateLimit-Limit": str(decision.limit),
        "RateLimit-Remaining": str(decision.remaining),
        "RateLimit-Reset": str(math.ceil(decision.reset_s)),
        "RateLimit-Policy": f"{decision.limit};w={math.ceil(decision.policy_window_s)}",
    }
    if not decision.allowed:
        headers["Retry-After"] = str(max(1, math.ceil(decision.retry_after_s)))
    return headers
