"""bench/transport_floor.py's payloads and its floor line (no processes started; the smoke pass in
tests/e2e/test_bench_smoke.py runs the servers)."""

from __future__ import annotations

import pytest

from ragmesh_bench.harness import ROOT, bench_script


@pytest.fixture
def floor(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # the script imports search_latency beside it
    return bench_script("transport_floor")


def test_the_payloads_are_a_search_s(floor) -> None:
    response = floor.search_response()
    assert len(response.results) == floor.CANDIDATES == 50
    assert {len(r.chunk.quote) for r in response.results} == {520}
    request = floor.rerank_request()
    assert len(request.texts) == len(request.priors) == floor.CANDIDATES
    assert len(floor.rerank_response().results) == floor.CANDIDATES
    assert len(floor.search_answer()["results"]) == floor.TOP_K == 10


def test_the_floor_sums_the_three_transports_and_gives_the_budget_left(floor) -> None:
    lines = {
        "http": {"p50_ms": 0.5, "client_cpu_ms": 0.1, "server_cpu_ms": 0.4},
        "retrieval_call": {"p50_ms": 1.0, "client_cpu_ms": 0.5, "server_cpu_ms": 0.7},
        "rerank_call": {"p50_ms": 1.0, "client_cpu_ms": 0.5, "server_cpu_ms": 0.6},
    }
    line = floor.floor_line("instrumented", lines, 10.0)
    assert line["p50_ms"] == 2.5 and line["cpu_ms"] == 2.8
    assert line["budget_ms"] == 3.0 and line["left_for_the_services_ms"] == 0.5
    assert "budget_ms" not in floor.floor_line("bare", lines, None)
