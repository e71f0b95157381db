"""A bounded least-recently-used map, counting hits and misses (the runtime's caches)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruCache(Generic[K, V]):
    """Used only from the runtime's single inference thread, hence no lock. ``max_entries`` 0
    turns it off: every get misses and nothing is kept."""

    def __init__(self, max_entries: int) -> None:
        self.max_entries = max(0, max_entries)
        self._items: OrderedDict[K, V] = OrderedDict()
        self.hits = 0
        self.misses = 0
        self.writes = 0  # puts so far: a cache whose count moved since its last save is saved again

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def get(self, key: K) -> V | None:
        if not self.max_entries:
            return None
        value = self._items.get(key)
        if value is None:
            self.misses += 1
            return None
        self._items.move_to_end(key)
        self.hits += 1
        return value

    def put(self, key: K, value: V) -> None:
        if not self.max_entries:
            return
        self._items[key] = value
        self._items.move_to_end(key)
        self.writes += 1
        while len(self._items) > self.max_entries:
            self._items.popitem(last=False)

    def items(self) -> list[tuple[K, V]]:
        return list(self._items.items())
