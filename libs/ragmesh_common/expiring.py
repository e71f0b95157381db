"""A value that is loaded, kept for a short TTL and loaded again by one caller at a time.

Retrieval's catalogue of active corpora, and the gateway's served corpus ids and their visibility,
are read by every request and change only when an index is promoted. Each is an :class:`Expiring`
value: fresh for ``ttl_s``; once expired, the first caller loads it again and the callers arriving
meanwhile wait for that load, so a burst of requests loads once, not once each.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Expiring(Generic[T]):
    """``load()``'s value, kept ``ttl_s`` seconds from the moment its load began.

    ``refresh_ahead`` (a share of the TTL): the first caller past that share starts a load in the
    background and is answered with the value it found, so under steady traffic no caller waits.
    ``keep_on`` (exception types): a load failing so keeps the last value (``initial`` before any)
    and counts it as half a TTL old, so it is tried again soon but not by every caller. Any other
    failure reaches the callers that waited for the load, and the value stays expired.
    """

    def __init__(self, load: Callable[[], Awaitable[T]], *, ttl_s: float,
                 clock: Callable[[], float] = time.monotonic, refresh_ahead: float = 1.0,
                 keep_on: tuple[type[BaseException], ...] = (), initial: T | None = None) -> None:
        self._load = load
        self._ttl_s = ttl_s
        self._fresh_s = ttl_s * refresh_ahead
        self._clock = clock
        self._keep_on = keep_on
        self._value = initial
        self._loaded_at = float("-inf")
        self._loading = asyncio.Lock()
        self._background: asyncio.Task[None] | None = None

    def invalidate(self) -> None:
        """The next caller loads the value again (and waits for it)."""
        self._loaded_at = float("-inf")

    async def get(self) -> T:
        age = self._clock() - self._loaded_at
        if age >= self._fresh_s:
            if age < self._ttl_s:
                if self._background is None or self._background.done():
                    self._background = asyncio.create_task(self._load_once())
            else:
                await self._load_once()
        return self._value

    async def _load_once(self) -> None:
        async with self._loading:
            # Loaded by the caller this one waited for, or by a background load meanwhile.
            if self._clock() - self._loaded_at < self._fresh_s:
                return
            started = self._clock()
            try:
                self._value = await self._load()
            except self._keep_on:
                self._loaded_at = started - self._ttl_s / 2
                return
            self._loaded_at = started
