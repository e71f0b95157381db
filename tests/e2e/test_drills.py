"""The fault drills of bench/drills.py, bounded, on the e2e corpus (issue 12, Build 7).

One supervised mesh (``ragmesh up``, with its own PostgreSQL and Redis) under four clients; one
after another rerank, generation, the runtime, retrieval, Redis and PostgreSQL are SIGKILLed, and
the indexer dies mid-build (at a build checkpoint, as under SIGKILL), and each comes back.
Before: one death stopped all six processes, returning services went unused for 17-38 s, a
Redis restart degraded every stale connection and lost the sessions. Asserted per drill: the degraded flags it implies and no others, no 5xx except the
documented 503 while retrieval is down, recovery (back -> first clean answer) within 5 s, the
supervisor's report, and nothing lost; with generation or the runtime down, a chat gets the
retrieval summary and its root span says ERROR with the flags (issue 23). Then the privilege and
cross-origin cases of the issue against the same services. About three minutes on two busy cores.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ragmesh_bench.drills import run

ROOT = Path(__file__).resolve().parents[2]
# The module's mesh, seven drills and the hostile cases run in the first test's setup: 249 s alone at
# load 15, past pytest's 300 s default with a second copy beside it (both copies timed out in the
# indexer drill). A hang guard, not a threshold.
pytestmark = pytest.mark.timeout(900)

RECOVERY_S = 5.0
# drill -> the degraded flags its outage may set (and at least the first one must appear). Any other
# flag is a fault of its own, not load: one `embedding` in the generation drill (CI, 2026-12-03) was
# retrieval's runtime client reusing a keep-alive connection the runtime was closing (fixed in
# ragmesh_common.clients.tei). A row's ``unplanned`` names such answers and the reason their spans give.
FLAGS = {
    "rerank": {"rerank"},
    "generation": {"generation"},
    "runtime": {"generation", "rerank", "embedding"},
    "retrieval": set(),
    "indexer": set(),
    "redis": {"ratelimit", "session_memory"},
    "postgres": set(),
}


@pytest.fixture(scope="module")
def drills() -> dict:
    return run(ROOT / "tests" / "fixtures" / "e2e_corpus", clients=4, only=[], store_down_s=2.0,
               log=lambda line: print(line, file=sys.stderr))


@pytest.fixture(scope="module")
def rows(drills) -> dict[str, dict]:
    return {row["drill"]: row for row in drills["rows"]}


def test_every_drill_ran_under_load(rows) -> None:
    assert set(rows) == set(FLAGS)
    assert all(row["requests"] >= 10 for row in rows.values()), {k: r["requests"] for k, r in rows.items()}


@pytest.mark.parametrize("drill", sorted(FLAGS))
def test_each_drill_degrades_as_designed_and_recovers_within_5_s(rows, drill: str) -> None:
    row = rows[drill]
    assert set(row["degraded"]) <= FLAGS[drill], row
    if drill == "retrieval":
        # The end of the line: search needs retrieval. The documented 503, and nothing else.
        assert set(row["server_errors"]) == {"503 UNAVAILABLE"}, row
        assert row["errors"] == sum(row["server_errors"].values()), row
    else:
        assert row["errors"] == 0 and not row["server_errors"], row
    if drill in ("rerank", "generation", "runtime", "redis"):
        assert row["degraded"], f"{drill} down and nobody noticed: {row}"
    assert row["recovery_s"] is not None and row["recovery_s"] <= RECOVERY_S, row
    assert row["data_lost"] == [], row


def test_the_runtime_outage_flags_each_model_dependency(rows) -> None:
    assert {"rerank", "generation"} <= set(rows["runtime"]["degraded"]), rows["runtime"]


def test_the_supervisor_reported_every_restart(drills) -> None:
    restarted = {line.split()[1] for line in drills["restarts"] if line.startswith("ragmesh: ")}
    assert {"rerank", "generation", "runtime", "retrieval", "indexer"} <= restarted, drills["restarts"]


def test_an_interrupted_build_fails_and_the_served_version_stays(rows) -> None:
    assert "interrupted build exited" in rows["indexer"]["probe"]
    # CI, 2026-12-04: "exited 0" - the build it meant to interrupt had already finished.
    assert "exited 0" not in rows["indexer"]["probe"], rows["indexer"]
    # The restarted indexer fails the candidate the dead one left half-built, before it serves.
    assert "its candidate is failed" in rows["indexer"]["probe"], rows["indexer"]
    assert rows["indexer"]["data_lost"] == []


def test_privilege_escalation_and_cross_origin_are_refused(drills) -> None:
    wrong = [(case, expected, got) for case, expected, got in drills["cases"] if expected != got]
    assert not wrong, wrong
    assert len(drills["cases"]) >= 10


@pytest.mark.parametrize("drill", ["generation", "runtime"])
def test_a_chat_while_generation_is_down_is_the_retrieval_summary_and_its_root_span_says_so(rows, drill) -> None:
    """docs/operations.md, "What an outage means": generation (or its model) down gives the retrieval
    summary instead of an answer, flagged ``generation``; the request's root span is ERROR with the
    flags (issue 23, Build 7). Before: ``status: "error"`` (UNAVAILABLE) and a root span that said ok."""
    chat = rows[drill]["chat_during"]
    assert (chat["http"], chat["status"], chat["error"]) == (200, "done", None), chat
    assert (chat["answer"], chat["answer_status"], chat["sources_basis"]) == ("", "withheld", "retrieved"), chat
    assert chat["sources"] > 0 and "generation" in chat["degraded"], chat
    assert chat["finish_reason"].startswith("generation_"), chat
    span = chat["root_span"]
    assert span["status"] == "ERROR" and span["error_type"] == "degraded", chat
    assert span["degraded"] == chat["degraded"], chat
    assert span["status_message"] == "degraded: " + ", ".join(chat["degraded"]), chat


def test_readiness_during_an_outage_says_what_it_means(rows) -> None:
    runtime = rows["runtime"]["ready_during"]
    assert runtime["http"] == 200 and runtime["status"] == "degraded", runtime
    assert set(runtime["degraded"]) == {"embedding", "rerank", "generation"}, runtime
    rerank = rows["rerank"]["ready_during"]
    assert rerank["http"] == 503 and rerank["checks"]["rerank"] == "not_serving", rerank
