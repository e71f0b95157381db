"""The one way ragmesh opens Redis: a client that survives a Redis restart.

``Redis.from_url`` alone builds its pool with no retries at all, so after a Redis restart the first
command on every pooled connection fails ("Connection closed by server") and the rate limiter or the
session memory degrades once per stale connection, for as long as those connections live. Here a
command that finds its connection dead is retried once, at once, on a new one; callers still bound
each call in time (rate limits 0.5 s, sessions 1 s), so a Redis that is really down fails fast.
"""

from __future__ import annotations

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, TimeoutError


def connect(url: str) -> Redis:
    return Redis.from_url(
        url,
        retry=Retry(NoBackoff(), retries=1),
        retry_on_error=[ConnectionError, TimeoutError, OSError],
        socket_connect_timeout=1.0,
        socket_keepalive=True,
    )
