"""RedisSessionMemory against the real Redis: ids, owners, TTL, caps, and a store that is down."""

from __future__ import annotations

import base64
import uuid
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.sessions.ids import SESSION_PREFIX, owner_key, storage_key
from ragmesh_gateway.sessions.ports import Turn
from ragmesh_gateway.sessions.redis_memory import RedisSessionMemory

ALICE = owner_key("alice")
BOB = owner_key("bob")


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def prefix() -> str:
    return f"ragmesh-test:{uuid.uuid4().hex[:12]}:session"


@pytest.fixture(autouse=True)
async def _cleanup(redis: Redis, prefix: str) -> AsyncIterator[None]:
    yield
    keys = [key async for key in redis.scan_iter(match=f"{prefix}:*")]
    if keys:
        await redis.delete(*keys)


def memory(redis: Redis, prefix: str, **caps) -> RedisSessionMemory:
    return RedisSessionMemory(redis, key_prefix=prefix, **caps)


async def test_a_session_remembers_turns_in_order_for_its_owner(redis: Redis, prefix: str) -> None:
    store = memory(redis, prefix)
    session_id = await store.create(ALICE)
    assert await store.history(session_id, ALICE) == []
    first = [Turn("user", "first?"), Turn("assistant", "one.", ("Guide > A",))]
    await store.remember(session_id, ALICE, first)
    await store.remember(session_id, ALICE, [Turn("user", "second?")])
    assert await store.history(session_id, ALICE) == [
        Turn("user", "first?"), Turn("assistant", "one.", ("Guide > A",)), Turn("user", "second?")]


async def test_ids_are_unguessable_and_never_stored_in_clear(redis: Redis, prefix: str) -> None:
    store = memory(redis, prefix)
    ids = {await store.create(ALICE) for _ in range(20)}
    assert len(ids) == 20
    for session_id in ids:
        assert session_id.startswith(SESSION_PREFIX)
        raw = base64.urlsafe_b64decode(session_id[len(SESSION_PREFIX):] + "==")
        assert len(raw) * 8 >= 128
    keys = [key.decode() async for key in redis.scan_iter(match=f"{prefix}:*")]
    assert keys and not any(session_id in key for key in keys for session_id in ids)
    assert any(storage_key(next(iter(ids))) in key for key in keys)


async def test_unknown_and_foreign_ids_read_nothing(redis: Redis, prefix: str) -> None:
    store = memory(redis, prefix)
    session_id = await store.create(ALICE)
    await store.remember(session_id, ALICE, [Turn("user", "private question")])
    for sid, owner in [(session_id, BOB), ("rms_" + "A" * 32, ALICE)]:
        with pytest.raises(RagmeshError) as err:
            await store.history(sid, owner)
        assert err.value.code is ErrorCode.NOT_FOUND and "private" not in err.value.message
    # A stranger cannot write into it either.
    await store.remember(session_id, BOB, [Turn("user", "injected")])
    assert [t.content for t in await store.history(session_id, ALICE)] == ["private question"]


async def test_turn_count_and_byte_caps_keep_the_newest(redis: Redis, prefix: str) -> None:
    store = memory(redis, prefix, max_turns=4, max_bytes=10_000, max_turn_chars=50)
    session_id = await store.create(ALICE)
    for i in range(5):
        await store.remember(session_id, ALICE, [Turn("user", f"q{i}"), Turn("assistant", f"a{i}")])
    assert [t.content for t in await store.history(session_id, ALICE)] == ["q3", "a3", "q4", "a4"]

    await store.remember(session_id, ALICE, [Turn("user", "x" * 500)])
    history = await store.history(session_id, ALICE)
    assert history[-1].content == "x" * 50  # each turn is cut before it is stored

    small = memory(redis, prefix, max_turns=100, max_bytes=200)
    sid = await small.create(ALICE)
    for i in range(10):
        await small.remember(sid, ALICE, [Turn("user", f"question number {i} " + "y" * 20)])
    kept = await small.history(sid, ALICE)
    assert kept and kept[-1].content.startswith("question number 9")
    stored = await redis.lrange(f"{prefix}:{{{storage_key(sid)}}}:turns", 0, -1)
    assert sum(len(item) for item in stored) <= 200 and len(kept) < 10


async def test_the_newest_turn_stays_even_alone_over_the_byte_cap(redis: Redis, prefix: str) -> None:
    store = memory(redis, prefix, max_bytes=10, max_turn_chars=100)
    sid = await store.create(ALICE)
    await store.remember(sid, ALICE, [Turn("user", "a long question, longer than ten bytes")])
    assert [t.role for t in await store.history(sid, ALICE)] == ["user"]


async def test_ttl_is_set_and_slides_with_each_write(redis: Redis, prefix: str) -> None:
    store = memory(redis, prefix, ttl_s=100)
    sid = await store.create(ALICE)
    owner_key_name = f"{prefix}:{{{storage_key(sid)}}}:owner"
    assert 0 < await redis.pttl(owner_key_name) <= 100_000
    await redis.pexpire(owner_key_name, 5_000)
    await store.remember(sid, ALICE, [Turn("user", "q")])
    assert await redis.pttl(owner_key_name) > 5_000
    assert 0 < await redis.pttl(f"{prefix}:{{{storage_key(sid)}}}:turns") <= 100_000


async def test_an_expired_session_is_unknown(redis: Redis, prefix: str) -> None:
    store = memory(redis, prefix)
    sid = await store.create(ALICE)
    await redis.delete(f"{prefix}:{{{storage_key(sid)}}}:owner")  # what expiry does
    with pytest.raises(RagmeshError) as err:
        await store.history(sid, ALICE)
    assert err.value.code is ErrorCode.NOT_FOUND
    await store.remember(sid, ALICE, [Turn("user", "late")])  # dropped, no error
    assert not await redis.exists(f"{prefix}:{{{storage_key(sid)}}}:turns")


async def test_unreadable_stored_turns_are_skipped(redis: Redis, prefix: str) -> None:
    store = memory(redis, prefix)
    sid = await store.create(ALICE)
    await store.remember(sid, ALICE, [Turn("user", "good")])
    turns_key = f"{prefix}:{{{storage_key(sid)}}}:turns"
    await redis.rpush(turns_key, b"\xff not json", b'{"role":"system","content":"x"}')
    assert await store.history(sid, ALICE) == [Turn("user", "good")]


async def test_a_store_that_is_down_is_unavailable_quickly(free_port) -> None:
    client = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0")
    store = RedisSessionMemory(client, timeout_s=2.0)
    try:
        for call in (store.create(ALICE), store.history("rms_x", ALICE),
                     store.remember("rms_x", ALICE, [Turn("user", "q")])):
            with pytest.raises(RagmeshError) as err:
                await call
            assert err.value.code is ErrorCode.UNAVAILABLE
    finally:
        await client.aclose()
