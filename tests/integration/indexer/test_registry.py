"""The index version registry against the real PostgreSQL, each test in its own throwaway schema."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import asyncpg
import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_indexer.registry import BuildStats, CorpusSpec, VersionState
from ragmesh_indexer.registry.postgres import PostgresIndexRegistry


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> None:
        self.now += delta


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def registry(pg_url, unique_schema, clock):
    schema = unique_schema("idx")
    registry = await PostgresIndexRegistry.open(pg_url, schema=schema, clock=clock, max_size=12)
    registry.schema = schema
    try:
        yield registry
    finally:
        await registry.close()


async def new_corpus(registry, corpus="docs"):
    spec = CorpusSpec(id=corpus, library="ragmesh", version="1.0", root="/srv/docs",
                      include=["**/*.md"], exclude=["drafts/**"])
    return await registry.upsert_corpus(spec)


async def validated(registry, version, *, corpus="docs", content="c", config="k"):
    await registry.create_candidate(corpus, version, content_hash=f"{content}-{version}", config_hash=config,
                                    collection=f"rm_{corpus}_{version}", actor="alice", reason="nightly")
    return await registry.mark_validated(corpus, version, {"passed": True, "gates": []})


async def states(registry, corpus="docs") -> dict[str, VersionState]:
    return {v.index_version: v.state for v in await registry.list_versions(corpus)}


async def expect_error(code: ErrorCode, awaitable) -> RagmeshError:
    with pytest.raises(RagmeshError) as err:
        await awaitable
    assert err.value.code is code, err.value
    return err.value


async def test_corpus_upsert_round_trips_and_updates(registry, clock):
    created = await new_corpus(registry)
    assert created.include == ["**/*.md"] and created.exclude == ["drafts/**"]
    assert created.created_at == clock.now
    clock.advance(timedelta(minutes=5))
    updated = await registry.upsert_corpus(CorpusSpec(id="docs", library="ragmesh", version="1.1"))
    assert updated.version == "1.1" and updated.include == []
    assert updated.created_at == created.created_at and updated.updated_at == clock.now
    assert [c.id for c in await registry.list_corpora()] == ["docs"]
    assert (await registry.get_corpus("docs")).version == "1.1"
    await expect_error(ErrorCode.NOT_FOUND, registry.get_corpus("nope"))


async def test_full_lifecycle_with_progress_stats_and_audit(registry, clock):
    await new_corpus(registry)
    candidate = await registry.create_candidate("docs", "v1", content_hash="c1", config_hash="k1",
                                                collection="rm_docs_v1", actor="alice", reason="first build")
    assert candidate.state is VersionState.CANDIDATE and candidate.stats == BuildStats()
    await registry.set_progress("docs", "v1", "embed", 10, 40)
    await registry.set_progress("docs", "v1", "embed", 30, 40)
    [progress] = await registry.get_progress("docs")
    assert (progress.index_version, progress.stage, progress.done, progress.total) == ("v1", "embed", 30, 40)

    stats = BuildStats(documents=3, chunks=40, embedded=35, reused=5)
    assert (await registry.set_stats("docs", "v1", stats)).stats == stats
    report = {"passed": True, "gates": [{"gate": "quotes", "passed": True}]}
    done = await registry.mark_validated("docs", "v1", report)
    assert done.state is VersionState.VALIDATED and done.validation == report
    assert await registry.get_progress("docs") == [], "only builds still in candidate state are in progress"
    assert await registry.active_version("docs") is None

    clock.advance(timedelta(hours=1))
    result = await registry.promote("docs", "v1", actor="bob", reason="launch")
    assert (result.active, result.previous, result.changed) == ("v1", None, True)
    active = await registry.active_version("docs")
    assert active.index_version == "v1" and active.promoted_at == clock.now and active.stats == stats

    await validated(registry, "v2")
    assert (await registry.promote("docs", "v2", actor="bob", reason="refresh")).previous == "v1"
    await validated(registry, "v3")
    result = await registry.promote("docs", "v3", actor="carol", reason="refresh again")
    assert (result.active, result.previous) == ("v3", "v2")
    assert await states(registry) == {"v3": VersionState.ACTIVE, "v2": VersionState.PREVIOUS,
                                      "v1": VersionState.VALIDATED}
    assert [v.index_version for v in await registry.list_versions("docs")] == ["v3", "v2", "v1"]

    trail = [(e.from_state, e.to_state, e.actor) for e in reversed(await registry.list_events("docs"))
             if e.index_version == "v1"]
    assert trail == [
        (None, VersionState.CANDIDATE, "alice"),
        (VersionState.CANDIDATE, VersionState.VALIDATED, "indexer"),
        (VersionState.VALIDATED, VersionState.ACTIVE, "bob"),
        (VersionState.ACTIVE, VersionState.PREVIOUS, "bob"),
        (VersionState.PREVIOUS, VersionState.VALIDATED, "carol"),
    ]


async def test_promoting_the_active_version_again_changes_nothing(registry):
    await new_corpus(registry)
    await validated(registry, "v1")
    await validated(registry, "v2")
    await registry.promote("docs", "v1", actor="a", reason="r")
    await registry.promote("docs", "v2", actor="a", reason="r")
    events_before = len(await registry.list_events("docs"))
    again = await registry.promote("docs", "v2", actor="a", reason="r")
    assert (again.active, again.previous, again.changed) == ("v2", "v1", False)
    assert len(await registry.list_events("docs")) == events_before
    assert await states(registry) == {"v2": VersionState.ACTIVE, "v1": VersionState.PREVIOUS}


async def test_rollback_swaps_active_and_previous(registry):
    await new_corpus(registry)
    await validated(registry, "v1")
    await registry.promote("docs", "v1", actor="a", reason="r")
    err = await expect_error(ErrorCode.CONFLICT, registry.rollback("docs", actor="a", reason="oops"))
    assert "no previous" in err.message
    await validated(registry, "v2")
    await registry.promote("docs", "v2", actor="a", reason="r")

    result = await registry.rollback("docs", actor="oncall", reason="bad answers")
    assert (result.active, result.previous, result.changed) == ("v1", "v2", True)
    assert await states(registry) == {"v1": VersionState.ACTIVE, "v2": VersionState.PREVIOUS}
    assert (await registry.list_events("docs", limit=1))[0].reason == "bad answers"

    # Promoting the previous version explicitly is the same swap.
    result = await registry.promote("docs", "v2", actor="oncall", reason="fixed")
    assert (result.active, result.previous) == ("v2", "v1")
    await expect_error(ErrorCode.NOT_FOUND, registry.rollback("unknown", actor="a", reason="r"))


async def test_invalid_transitions_raise_conflict_or_not_found(registry):
    await new_corpus(registry)
    await registry.create_candidate("docs", "cand", content_hash="c", config_hash="k", collection="rm_cand",
                                    actor="a")
    await expect_error(ErrorCode.CONFLICT, registry.promote("docs", "cand", actor="a", reason="r"))
    await expect_error(ErrorCode.CONFLICT, registry.mark_retired("docs", "cand", actor="a", reason="r"))

    await registry.create_candidate("docs", "bad", content_hash="c2", config_hash="k", collection="rm_bad",
                                    actor="a")
    failed = await registry.mark_failed("docs", "bad", {"passed": False}, reason="quote gate")
    assert failed.state is VersionState.FAILED and failed.validation == {"passed": False}
    await expect_error(ErrorCode.CONFLICT, registry.promote("docs", "bad", actor="a", reason="r"))
    await expect_error(ErrorCode.CONFLICT, registry.mark_validated("docs", "bad", {}))

    await validated(registry, "good")
    await registry.promote("docs", "good", actor="a", reason="r")
    await expect_error(ErrorCode.CONFLICT, registry.mark_retired("docs", "good", actor="a", reason="r"))
    await expect_error(ErrorCode.CONFLICT, registry.mark_failed("docs", "good", {}))

    await expect_error(ErrorCode.NOT_FOUND, registry.promote("docs", "missing", actor="a", reason="r"))
    await expect_error(ErrorCode.NOT_FOUND, registry.promote("other", "good", actor="a", reason="r"))
    await expect_error(ErrorCode.NOT_FOUND, registry.get_version("docs", "missing"))
    await expect_error(ErrorCode.NOT_FOUND, registry.set_progress("docs", "missing", "scan", 0, 1))
    await expect_error(ErrorCode.NOT_FOUND, registry.create_candidate(
        "other", "v1", content_hash="c", config_hash="k", collection="rm_other", actor="a"))
    await expect_error(ErrorCode.CONFLICT, registry.create_candidate(
        "docs", "cand", content_hash="c", config_hash="k", collection="rm_new", actor="a"))
    await expect_error(ErrorCode.CONFLICT, registry.create_candidate(
        "docs", "fresh", content_hash="c", config_hash="k", collection="rm_cand", actor="a"))
    assert await states(registry) == {"good": VersionState.ACTIVE, "bad": VersionState.FAILED,
                                      "cand": VersionState.CANDIDATE}


async def test_find_by_hashes_returns_only_reusable_versions(registry, clock):
    await new_corpus(registry)
    assert await registry.find_by_hashes("docs", "c", "k") is None
    await registry.create_candidate("docs", "v1", content_hash="c", config_hash="k", collection="rm_v1",
                                    actor="a")
    await registry.mark_failed("docs", "v1", {"passed": False})
    assert await registry.find_by_hashes("docs", "c", "k") is None, "a failed build is never reused"

    await registry.create_candidate("docs", "v2", content_hash="c", config_hash="k", collection="rm_v2",
                                    actor="a")
    await registry.mark_validated("docs", "v2", {})
    assert (await registry.find_by_hashes("docs", "c", "k")).index_version == "v2"
    assert await registry.find_by_hashes("docs", "c", "other-config") is None
    assert await registry.find_by_hashes("elsewhere", "c", "k") is None


async def test_concurrent_promotes_keep_exactly_one_active(registry):
    await new_corpus(registry)
    names = [f"v{i}" for i in range(8)]
    for name in names:
        await validated(registry, name)

    results = await asyncio.gather(*(registry.promote("docs", n, actor="race", reason="r") for n in names))
    assert all(r.changed for r in results)
    current = await states(registry)
    assert list(current.values()).count(VersionState.ACTIVE) == 1
    assert list(current.values()).count(VersionState.PREVIOUS) == 1
    # Serialised: each promotion saw the one before it as active.
    events = [e for e in reversed(await registry.list_events("docs")) if e.to_state is VersionState.ACTIVE]
    order = [e.index_version for e in events]
    assert sorted(order) == names
    assert current[order[-1]] is VersionState.ACTIVE and current[order[-2]] is VersionState.PREVIOUS
    by_name = {r.active: r for r in results}
    assert [by_name[n].previous for n in order] == [None, *order[:-1]]

    await validated(registry, "same")
    same = await asyncio.gather(*(registry.promote("docs", "same", actor="race", reason="r")
                                  for _ in range(6)))
    assert sum(r.changed for r in same) == 1
    assert (await registry.active_version("docs")).index_version == "same"


async def test_retire_eligibility_waits_for_the_new_active_to_serve(registry, clock):
    await new_corpus(registry)
    week, day = timedelta(days=7), timedelta(days=1)
    await validated(registry, "v1")
    await registry.promote("docs", "v1", actor="a", reason="r")
    clock.advance(week)
    await validated(registry, "v2")
    await registry.promote("docs", "v2", actor="a", reason="r")
    clock.advance(week)
    assert await registry.retire_eligible("docs", day) == [], "v1 is the rollback target"

    await validated(registry, "v3")
    await registry.promote("docs", "v3", actor="a", reason="r")  # v1 is now superseded
    await registry.create_candidate("docs", "v4", content_hash="c4", config_hash="k", collection="rm_v4",
                                    actor="a")
    await registry.mark_failed("docs", "v4", {"passed": False})
    await validated(registry, "v5")  # newer than the active one, never promoted: awaits promotion
    await registry.create_candidate("docs", "v6", content_hash="c6", config_hash="k", collection="rm_v6",
                                    actor="a")  # a build in progress

    assert await registry.retire_eligible("docs", day) == []
    clock.advance(day - timedelta(seconds=1))
    assert await registry.retire_eligible("docs", day) == []
    clock.advance(timedelta(seconds=1))
    assert [v.index_version for v in await registry.retire_eligible("docs", day)] == ["v1", "v4"]
    assert [v.index_version for v in await registry.retire_eligible("docs", week)] == []

    retired = await registry.mark_retired("docs", "v1", actor="janitor", reason="superseded")
    assert retired.state is VersionState.RETIRED and retired.retired_at == clock.now
    assert [v.index_version for v in await registry.retire_eligible("docs", day)] == ["v4"]
    await expect_error(ErrorCode.CONFLICT, registry.promote("docs", "v1", actor="a", reason="r"))
    await expect_error(ErrorCode.CONFLICT, registry.mark_retired("docs", "v1", actor="a", reason="r"))
    assert await registry.find_by_hashes("docs", "c-v1", "k") is None


async def test_sql_constraints_refuse_a_second_active_version(registry, pg_url):
    await new_corpus(registry)
    await validated(registry, "v1")
    await validated(registry, "v2")
    await registry.promote("docs", "v1", actor="a", reason="r")
    conn = await asyncpg.connect(pg_url, server_settings={"search_path": registry.schema})
    try:
        with pytest.raises(asyncpg.ExclusionViolationError):
            await conn.execute("UPDATE index_versions SET state = 'active', promoted_at = now() "
                               "WHERE index_version = 'v2'")
        with pytest.raises(asyncpg.CheckViolationError):
            await conn.execute("UPDATE index_versions SET state = 'retired' WHERE index_version = 'v2'")
    finally:
        await conn.close()


async def test_migrations_apply_once_across_opens(registry, pg_url, clock):
    again = await PostgresIndexRegistry.open(pg_url, schema=registry.schema, clock=clock)
    try:
        await new_corpus(again)
        assert [c.id for c in await registry.list_corpora()] == ["docs"]
    finally:
        await again.close()


async def test_removing_a_corpus_retires_every_version_keeps_the_audit_and_allows_a_fresh_start(registry, clock):
    await new_corpus(registry)
    await new_corpus(registry, "other")
    for version in ("v1", "v2"):
        await validated(registry, version)
        await registry.promote("docs", version, actor="alice", reason="ship")
    await registry.create_candidate("docs", "v3", content_hash="c-v3", config_hash="k", collection="rm_docs_v3",
                                    actor="alice")
    await registry.set_progress("docs", "v3", "embed", 1, 4)
    clock.advance(timedelta(minutes=1))

    before = await registry.remove_corpus("docs", actor="bob", reason="indexed by mistake")
    assert {v.index_version: v.state for v in before} == {
        "v3": VersionState.CANDIDATE, "v2": VersionState.ACTIVE, "v1": VersionState.PREVIOUS}
    assert await states(registry) == {v: VersionState.RETIRED for v in ("v1", "v2", "v3")}
    assert await registry.active_version("docs") is None and await registry.get_progress("docs") == []
    events = await registry.list_events("docs")
    assert [(e.index_version, e.from_state, e.to_state, e.actor) for e in events[:3]] == [
        ("v1", "previous", "retired", "bob"), ("v2", "active", "retired", "bob"), ("v3", "candidate", "retired", "bob")]
    assert events[0].reason == "indexed by mistake"
    # Gone for every read and move; the other corpus is untouched.
    assert [c.id for c in await registry.list_corpora()] == ["other"]
    assert await registry.removed_corpora() == ["docs"]
    await expect_error(ErrorCode.NOT_FOUND, registry.get_corpus("docs"))
    await expect_error(ErrorCode.NOT_FOUND, registry.remove_corpus("docs", actor="bob", reason="again"))
    await expect_error(ErrorCode.NOT_FOUND, registry.promote("docs", "v2", actor="bob", reason=""))
    await expect_error(ErrorCode.NOT_FOUND, registry.create_candidate(
        "docs", "v4", content_hash="c", config_hash="k", collection="rm_docs_v4", actor="bob"))
    # Building it again registers it afresh: new versions, nothing of the old ones reusable.
    await new_corpus(registry)
    assert await registry.removed_corpora() == []
    assert await registry.find_by_hashes("docs", "c-v2", "k") is None
    await validated(registry, "v4")
    assert (await registry.promote("docs", "v4", actor="bob", reason="")).active == "v4"
