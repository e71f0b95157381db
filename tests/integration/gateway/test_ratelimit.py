"""RateLimiter against a real Redis: bucket semantics, expiry, failure mode, and two OS processes."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import AsyncIterator

import pytest
from prometheus_client import REGISTRY
from redis.asyncio import Redis

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_gateway.access.ratelimit import Limit, RateLimiter, rate_limit_headers

@pytest.fixture()
async def redis_client(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture()
def key_prefix() -> str:
    return f"ragmesh:test:rl:{uuid.uuid4().hex[:12]}"


async def test_burst_is_admitted_then_refused_with_retry_after(redis_client: Redis, key_prefix: str) -> None:
    limiter = RateLimiter(redis_client, {"search": Limit(rate_per_s=1, burst=3)}, key_prefix=key_prefix)
    decisions = [await limiter.check("search", "token:a") for _ in range(4)]
    assert [d.allowed for d in decisions] == [True, True, True, False]
    assert [d.remaining for d in decisions] == [2, 1, 0, 0]
    refused = decisions[-1]
    assert 0 < refused.retry_after_s <= 1.0
    assert refused.limit == 3
    headers = rate_limit_headers(refused)
    assert headers["Retry-After"] == "1"
    assert headers["RateLimit-Limit"] == "3" and headers["RateLimit-Remaining"] == "0"
    assert headers["RateLimit-Policy"] == "3;w=3"
    assert "Retry-After" not in rate_limit_headers(decisions[0])


async def test_tokens_come_back_at_the_configured_rate(redis_client: Redis, key_prefix: str) -> None:
    limiter = RateLimiter(redis_client, {"chat": Limit(rate_per_s=20, burst=1)}, key_prefix=key_prefix)
    assert (await limiter.check("chat", "k")).allowed
    refused = await limiter.check("chat", "k")
    assert not refused.allowed
    await asyncio.sleep(refused.retry_after_s + 0.02)
    assert (await limiter.check("chat", "k")).allowed


async def test_keys_and_route_classes_have_separate_buckets(redis_client: Redis, key_prefix: str) -> None:
    limiter = RateLimiter(redis_client, {"search": Limit(1, 1), "*": Limit(1, 2)}, key_prefix=key_prefix)
    assert (await limiter.check("search", "ip:10.0.0.1")).allowed
    assert not (await limiter.check("search", "ip:10.0.0.1")).allowed
    assert (await limiter.check("search", "ip:10.0.0.2")).allowed
    fallback = await limiter.check("files", "ip:10.0.0.1")  # no own limit: the "*" fallback
    assert fallback.allowed and fallback.limit == 2


async def test_unconfigured_route_class_without_fallback_is_an_internal_error(redis_client: Redis,
                                                                             key_prefix: str) -> None:
    limiter = RateLimiter(redis_client, {"search": Limit(1, 1)}, key_prefix=key_prefix)
    with pytest.raises(RagmeshError) as info:
        await limiter.check("admin", "k")
    assert info.value.code is ErrorCode.INTERNAL


async def test_bucket_expires_once_it_would_be_full(redis_client: Redis, key_prefix: str) -> None:
    limiter = RateLimiter(redis_client, {"search": Limit(rate_per_s=50, burst=5)}, key_prefix=key_prefix)
    for _ in range(5):
        await limiter.check("search", "k")
    key = limiter.bucket_key("search", "k")
    ttl_ms = await redis_client.pttl(key)
    assert 0 < ttl_ms <= 5 / 50 * 1000 + 1
    # The bucket's timestamp is Redis server time (microseconds), the clock all replicas share.
    server_s, server_us = await redis_client.time()
    stamp = int(await redis_client.hget(key, "ts"))
    assert abs(stamp - (server_s * 1_000_000 + server_us)) < 5_000_000
    deadline = time.monotonic() + 5
    while await redis_client.exists(key) and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    assert not await redis_client.exists(key)


async def test_unreachable_redis_fails_open_or_closed_as_configured(free_port, key_prefix: str) -> None:
    dead = Redis(host="127.0.0.1", port=free_port(), socket_connect_timeout=0.5)
    labels = {"service": "gateway", "component": "ratelimit"}
    before = REGISTRY.get_sample_value("ragmesh_degraded_total", labels) or 0.0
    try:
        open_limiter = RateLimiter(dead, {"search": Limit(1, 4)}, key_prefix=key_prefix)
        decision = await open_limiter.check("search", "k")
        # Admitted but not counted: no budget is claimed, the degradation is flagged instead.
        assert decision.allowed and not decision.counted
        assert rate_limit_headers(decision) == {"Ragmesh-Degraded": "ratelimit"}
        closed = RateLimiter(dead, {"search": Limit(1, 4)}, key_prefix=key_prefix, fail_open=False)
        with pytest.raises(RagmeshError) as info:
            await closed.check("search", "k")
        assert info.value.code is ErrorCode.UNAVAILABLE
    finally:
        await dead.aclose()
    assert REGISTRY.get_sample_value("ragmesh_degraded_total", labels) == before + 2


_WORKER = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from redis.asyncio import Redis
    from ragmesh_gateway.access.ratelimit import Limit, RateLimiter

    url, prefix, rate, burst, duration, concurrency = sys.argv[1:7]

    async def main():
        redis = Redis.from_url(url)
        limiter = RateLimiter(redis, {"search": Limit(float(rate), int(burst))}, key_prefix=prefix)
        # Open the pool's connections and load the script now, so the timed window measures the
        # limiter rather than connection set-up.
        await asyncio.gather(*(limiter.check("search", "warm-up") for _ in range(int(concurrency))))
        print("ready", flush=True)
        start_at = float(sys.stdin.readline())
        end_at = start_at + float(duration)
        await asyncio.sleep(max(0.0, start_at - time.time()))
        counts = {"admitted": 0, "total": 0}

        async def hammer():
            while time.time() < end_at:
                decision = await limiter.check("search", "shared-key")
                counts["total"] += 1
                counts["admitted"] += decision.allowed

        await asyncio.gather(*(hammer() for _ in range(int(concurrency))))
        await redis.aclose()
        print(json.dumps(counts), flush=True)

    asyncio.run(main())
    """
)


def test_two_processes_share_one_bucket(redis_url: str, key_prefix: str) -> None:
    rate, burst, duration = 200.0, 40, 3.0
    args = [sys.executable, "-c", _WORKER, redis_url, key_prefix, str(rate), str(burst), str(duration), "8"]
    workers = [subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
               for _ in range(2)]
    try:
        for worker in workers:
            assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
        start_at = time.time() + 0.3
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(f"{start_at}\n")
            worker.stdin.flush()
        outputs = [worker.communicate(timeout=60)[0] for worker in workers]
        results = [json.loads(output.strip().splitlines()[-1]) for output in outputs]
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
    admitted = sum(r["admitted"] for r in results)
    attempted = sum(r["total"] for r in results)
    expected = rate * duration + burst
    assert all(r["admitted"] > 0 for r in results), results  # both processes really competed
    assert attempted > 2 * admitted, results  # the bucket was kept empty: demand far above the rate
    print(f"admitted={admitted} expected={expected} attempted={attempted}")
    assert abs(admitted - expected) <= 0.02 * expected, (admitted, expected, results)
