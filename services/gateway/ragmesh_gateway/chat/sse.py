"""Server-sent events for chat: meta, token*, sources, one terminal event, heartbeats between."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TypeVar

import msgspec
from litestar.response import ServerSentEventMessage

from ragmesh_gateway.chat.presenters import chat_meta, event_payload
from ragmesh_gateway.chat.service import ChatSession

T = TypeVar("T")


class Heartbeat:
    """Marker yielded by :func:`with_heartbeat` when the source was quiet for a whole interval."""


HEARTBEAT = Heartbeat()


async def with_heartbeat(source: AsyncIterator[T], interval_s: float) -> AsyncIterator[T | Heartbeat]:
    """Items of ``source``, with HEARTBEAT whenever ``interval_s`` passes without one.

    The pending read is kept across heartbeats (never restarted), so no item is lost; if the
    consumer stops, the pending read is cancelled, which cancels the upstream call.
    """
    pending: asyncio.Future[T] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(source))
            done, _ = await asyncio.wait({pending}, timeout=interval_s)
            if not done:
                yield HEARTBEAT
                continue
            finished, pending = pending, None
            try:
                item = finished.result()
            except StopAsyncIteration:
                return
            yield item
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
        close = getattr(source, "aclose", None)
        if close is not None:
            with contextlib.suppress(RuntimeError):  # already closed by the cancelled read
                await close()


def _message(event: str, payload: msgspec.Struct) -> ServerSentEventMessage:
    return ServerSentEventMessage(event=event, data=msgspec.json.encode(payload).decode())


async def sse_messages(
    session: ChatSession, request_id: str, heartbeat_s: float, origin: str = ""
) -> AsyncIterator[ServerSentEventMessage]:
    yield _message("meta", chat_meta(session, request_id))
    async for item in with_heartbeat(session.events, heartbeat_s):
        if isinstance(item, Heartbeat):
            yield ServerSentEventMessage(comment="ping", data=None)
            continue
        name, payload = event_payload(item, session, request_id, origin)
        yield _message(name, payload)
