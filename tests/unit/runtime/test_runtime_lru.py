"""LruCache: bounded, least recently used out first, off at 0."""

from __future__ import annotations

from ragmesh_runtime.lru import LruCache


def test_the_least_recently_used_entry_leaves_first() -> None:
    cache: LruCache[str, int] = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert (cache.get("b"), cache.get("a"), cache.get("c")) == (None, 1, 3)
    assert len(cache) == 2 and (cache.hits, cache.misses) == (3, 1)


def test_zero_entries_keeps_nothing() -> None:
    cache: LruCache[str, int] = LruCache(0)
    cache.put("a", 1)
    assert cache.get("a") is None and len(cache) == 0
