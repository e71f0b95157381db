"""SSE framing for chat: heartbeats while the source is quiet, nothing lost, cancellation passed on."""

from __future__ import annotations

import asyncio

from ragmesh_gateway.chat.sse import HEARTBEAT, with_heartbeat


async def slow_source(delays: list[float], closed: list[str]):
    try:
        for i, delay in enumerate(delays):
            await asyncio.sleep(delay)
            yield i
    except asyncio.CancelledError:
        closed.append("cancelled")
        raise
    finally:
        closed.append("closed")


async def test_heartbeats_fill_quiet_gaps_and_every_item_arrives_in_order() -> None:
    closed: list[str] = []
    # A gap many heartbeat intervals long guarantees at least one heartbeat without timing assertions.
    out = [item async for item in with_heartbeat(slow_source([0, 0.3, 0], closed), interval_s=0.01)]
    items = [x for x in out if x is not HEARTBEAT]
    assert items == [0, 1, 2]
    assert HEARTBEAT in out[out.index(0) : out.index(1)]
    assert closed == ["closed"]


async def test_no_heartbeat_when_items_keep_coming() -> None:
    closed: list[str] = []
    out = [item async for item in with_heartbeat(slow_source([0, 0, 0], closed), interval_s=60)]
    assert out == [0, 1, 2]


async def test_closing_the_stream_cancels_the_pending_read() -> None:
    closed: list[str] = []
    stream = with_heartbeat(slow_source([0, 3600], closed), interval_s=0.01)
    assert await anext(stream) == 0
    assert await anext(stream) is HEARTBEAT
    await stream.aclose()
    assert closed == ["cancelled", "closed"]
