"""ragmesh_common.expiring.Expiring: the short-lived value behind retrieval's corpus catalogue and the
gateway's corpus lists. Refreshing ahead and keeping a value through failures are also covered
through the gateway's directory (tests/unit/gateway/test_corpus_directory_refresh.py)."""

from __future__ import annotations

import asyncio

from ragmesh_common.expiring import Expiring


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Source:
    """Counts its loads; each takes a few event-loop turns and answers the load's number."""

    def __init__(self) -> None:
        self.loads = 0
        self.fail: type[Exception] | None = None

    async def load(self) -> int:
        self.loads += 1
        await asyncio.sleep(0.01)
        if self.fail is not None:
            raise self.fail("the source is down")
        return self.loads


def test_a_burst_loads_once_and_the_ttl_counts_from_when_the_load_began() -> None:
    async def scenario() -> None:
        clock, source = Clock(), Source()
        value = Expiring(source.load, ttl_s=2.0, clock=clock)
        assert await asyncio.gather(*(value.get() for _ in range(16))) == [1] * 16
        clock.now += 1.9
        assert await value.get() == 1 and source.loads == 1
        clock.now += 0.1
        assert await asyncio.gather(*(value.get() for _ in range(16))) == [2] * 16
        assert source.loads == 2

    asyncio.run(scenario())


def test_a_failed_load_reaches_the_callers_that_waited_and_the_next_caller_loads_again() -> None:
    async def scenario() -> None:
        clock, source = Clock(), Source()
        value = Expiring(source.load, ttl_s=2.0, clock=clock)
        assert await value.get() == 1
        clock.now += 5.0
        source.fail = ConnectionError
        results = await asyncio.gather(*(value.get() for _ in range(4)), return_exceptions=True)
        assert all(isinstance(r, ConnectionError) for r in results)
        assert source.loads == 5  # no value to fall back on: each waiting caller tried once itself
        source.fail = None
        assert await value.get() == 6 and await value.get() == 6 and source.loads == 6  # kept, not loaded again

    asyncio.run(scenario())


def test_a_kept_failure_serves_the_last_value_and_is_retried_after_half_a_ttl() -> None:
    async def scenario() -> None:
        clock, source = Clock(), Source()
        value = Expiring(source.load, ttl_s=2.0, clock=clock, keep_on=(ConnectionError,), initial=0)
        source.fail = ConnectionError
        assert await asyncio.gather(*(value.get() for _ in range(8))) == [0] * 8  # the initial value
        assert source.loads == 1
        clock.now += 0.9
        assert await value.get() == 0 and source.loads == 1
        clock.now += 0.2
        source.fail = None
        assert await value.get() == 2

    asyncio.run(scenario())


def test_invalidate_makes_the_next_caller_load_at_once() -> None:
    async def scenario() -> None:
        clock, source = Clock(), Source()
        value = Expiring(source.load, ttl_s=60.0, clock=clock)
        assert await value.get() == 1
        value.invalidate()
        assert await value.get() == 2 and source.loads == 2

    asyncio.run(scenario())


def test_refreshing_ahead_answers_the_value_found_while_one_background_load_runs() -> None:
    async def scenario() -> None:
        clock, source = Clock(), Source()
        value = Expiring(source.load, ttl_s=2.0, clock=clock, refresh_ahead=0.75)
        assert await value.get() == 1
        clock.now += 1.6
        assert await asyncio.gather(*(value.get() for _ in range(16))) == [1] * 16
        await asyncio.sleep(0.05)
        assert source.loads == 2 and await value.get() == 2

    asyncio.run(scenario())


def test_a_zero_ttl_loads_for_every_caller_in_turn() -> None:
    async def scenario() -> None:
        source = Source()
        value = Expiring(source.load, ttl_s=0.0)
        assert [await value.get() for _ in range(3)] == [1, 2, 3]

    asyncio.run(scenario())
