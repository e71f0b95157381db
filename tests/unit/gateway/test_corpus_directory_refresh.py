"""A burst of requests that finds the gateway's corpus lists expired asks retrieval once.

Every search reads the served corpus ids (the ACL's universe) and, with tokens, each corpus's
visibility; both are cached for a short TTL. Before, each request that found the cache expired
fetched on its own: 16 clients starting at once sent 16 ListCorpora calls to retrieval, and each
search waited for its own (bench/mesh_overhead.py, the first searches of a 16-client pass: 520 ms
against a 280 ms median, 200 ms of it in ListCorpora).
"""

from __future__ import annotations

import asyncio

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.adapters import SecurityStores, TokenAuthenticator
from ragmesh_gateway.access.ports import RequestInfo
from ragmesh_gateway.catalog import AllCorporaLister, CorpusCatalog, CorpusInfo, DiscoveredCorpusDirectory, IndexStats


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class SlowLister(AllCorporaLister):
    """Retrieval's ListCorpora: takes a few event-loop turns, counts its calls."""

    def __init__(self, corpora: list[str]) -> None:
        self.corpora = corpora
        self.calls = 0
        self.fail = False

    async def list_all_corpora(self) -> list[CorpusInfo]:
        self.calls += 1
        await asyncio.sleep(0.01)
        if self.fail:
            raise RagmeshError(ErrorCode.UNAVAILABLE, "retrieval is down")
        return [CorpusInfo(corpus=c, library=c.split("@")[0], version=c.split("@")[1]) for c in self.corpora]


async def burst(n: int, call):
    return await asyncio.gather(*(call() for _ in range(n)))


def test_a_burst_on_a_cold_directory_lists_once_and_every_request_sees_the_list() -> None:
    lister = SlowLister(["docs@1", "guide@2"])
    directory = DiscoveredCorpusDirectory(lister, clock=Clock())

    results = asyncio.run(burst(16, directory.corpus_ids))

    assert lister.calls == 1
    assert all(ids == {"docs@1", "guide@2"} for ids in results)


def test_a_burst_after_the_ttl_lists_once_more_and_sees_a_new_corpus() -> None:
    async def scenario() -> None:
        clock = Clock()
        lister = SlowLister(["docs@1"])
        directory = DiscoveredCorpusDirectory(lister, ttl_s=2.0, clock=clock)
        assert await directory.corpus_ids() == {"docs@1"}
        lister.corpora = ["docs@1", "new@1"]
        clock.now += 1.0
        assert await directory.corpus_ids() == {"docs@1"}  # inside the TTL: the cached list
        assert lister.calls == 1
        clock.now += 1.5
        results = await burst(16, directory.corpus_ids)
        assert lister.calls == 2
        assert all(ids == {"docs@1", "new@1"} for ids in results)

    asyncio.run(scenario())


def test_a_failed_refresh_is_tried_once_per_burst_and_the_known_list_keeps_serving() -> None:
    async def scenario() -> None:
        clock = Clock()
        lister = SlowLister(["docs@1"])
        directory = DiscoveredCorpusDirectory(lister, configured=frozenset({"pinned@1"}), ttl_s=2.0, clock=clock)
        assert await directory.corpus_ids() == {"docs@1", "pinned@1"}
        lister.fail = True
        clock.now += 3.0
        results = await burst(16, directory.corpus_ids)
        assert lister.calls == 2
        assert all(ids == {"docs@1", "pinned@1"} for ids in results)
        clock.now += 0.25  # a failure counts as a list half a TTL old: not retried at once
        await directory.corpus_ids()
        await asyncio.sleep(0.05)
        assert lister.calls == 2
        clock.now += 0.3  # then retried in the background, the known list answering meanwhile
        assert await directory.corpus_ids() == {"docs@1", "pinned@1"}
        await asyncio.sleep(0.05)
        assert lister.calls == 3
        lister.fail, lister.corpora = False, ["docs@1", "new@1"]
        clock.now += 0.6
        await directory.corpus_ids()
        await asyncio.sleep(0.05)
        assert lister.calls == 4
        assert await directory.corpus_ids() == {"docs@1", "new@1", "pinned@1"}

    asyncio.run(scenario())


def test_under_steady_traffic_the_list_is_refreshed_ahead_and_no_request_waits() -> None:
    async def scenario() -> None:
        clock = Clock()
        lister = SlowLister(["docs@1"])
        directory = DiscoveredCorpusDirectory(lister, ttl_s=2.0, clock=clock)
        await directory.corpus_ids()
        lister.corpora = ["docs@1", "new@1"]
        clock.now += 1.6  # in the last quarter of the TTL
        calls = lister.calls
        answered = await burst(16, directory.corpus_ids)
        assert all(ids == {"docs@1"} for ids in answered)  # answered before the new list arrived
        assert len(asyncio.all_tasks()) == 2  # this test and one background refresh for the whole burst
        await asyncio.sleep(0.05)
        assert lister.calls == calls + 1  # one background refresh for the whole burst
        assert await directory.corpus_ids() == {"docs@1", "new@1"}
        clock.now += 1.0  # refreshed at +1.6: fresh until +3.6
        await directory.corpus_ids()
        await asyncio.sleep(0.05)
        assert lister.calls == calls + 1

    asyncio.run(scenario())


def test_a_cancelled_first_caller_does_not_leave_the_others_without_a_list() -> None:
    async def scenario() -> None:
        lister = SlowLister(["docs@1"])
        directory = DiscoveredCorpusDirectory(lister, clock=Clock())
        first = asyncio.create_task(directory.corpus_ids())
        await asyncio.sleep(0)
        others = [asyncio.create_task(directory.corpus_ids()) for _ in range(4)]
        await asyncio.sleep(0)
        first.cancel()
        results = await asyncio.gather(*others)
        assert all(ids == {"docs@1"} for ids in results)
        with pytest.raises(asyncio.CancelledError):
            await first

    asyncio.run(scenario())


class CountingCatalog(CorpusCatalog):
    def __init__(self) -> None:
        self.calls = 0

    async def list_corpora(self, readable_corpora: tuple[str, ...]) -> list[CorpusInfo]:
        self.calls += 1
        await asyncio.sleep(0.01)
        return [CorpusInfo(corpus=c, library=c.split("@")[0], version=c.split("@")[1]) for c in readable_corpora]

    async def stats(self, readable_corpora: tuple[str, ...]) -> IndexStats:
        return IndexStats()


class NoTokens:
    async def authenticate(self, bearer: str):
        return None


class PublicAccess:
    async def readable_corpora(self, principal, visibility):
        return [corpus for corpus, seen_by in visibility if seen_by == "public"]


def test_a_burst_of_token_checks_reads_corpus_visibility_once() -> None:
    lister, catalog = SlowLister(["docs@1", "guide@2"]), CountingCatalog()
    stores = SecurityStores("postgresql://unused/x")
    stores.tokens, stores.access = NoTokens(), PublicAccess()  # type: ignore[assignment]
    authenticator = TokenAuthenticator(stores, catalog, DiscoveredCorpusDirectory(lister, clock=Clock()),
                                       allow_anonymous=True, trusted_proxies=[])

    callers = asyncio.run(burst(16, lambda: authenticator.authenticate(RequestInfo(headers={}, client_host="127.0.0.1"))))

    assert (lister.calls, catalog.calls) == (1, 1)
    assert all(c.readable_corpora == {"docs@1", "guide@2"} for c in callers)
