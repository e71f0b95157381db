"""RAGMESH_RETRIEVAL_MODE: one signal alone, as configured, and never reported as degraded."""

from __future__ import annotations

import pytest

from ragmesh_retrieval.settings import load_settings

from retrieval_fixtures import MeshFactory
from test_retrieval_search import ALPHA, ALPHA_DOCS, indexed


async def test_sparse_mode_never_calls_the_embedder(make_mesh: MeshFactory) -> None:
    mesh = await make_mesh(mode="sparse")
    await indexed(mesh)
    calls = mesh.embedder.calls
    outcome = await mesh.search("configure the retry budget", [ALPHA])
    assert mesh.embedder.calls == calls
    assert outcome.query_mode == "sparse"
    assert outcome.degraded == []
    assert outcome.hint == ""
    assert outcome.results[0].chunk.chunk_id == ALPHA_DOCS[0].chunk_id
    assert set(outcome.results[0].scores) == {"fused", "sparse"}


async def test_dense_mode_sends_no_keyword_query(make_mesh: MeshFactory) -> None:
    mesh = await make_mesh(mode="dense")
    await indexed(mesh)
    outcome = await mesh.search("configure the retry budget", [ALPHA])
    assert outcome.query_mode == "dense"
    assert outcome.degraded == []
    assert outcome.results[0].chunk.chunk_id == ALPHA_DOCS[0].chunk_id
    assert set(outcome.results[0].scores) == {"fused", "dense"}


async def test_dense_mode_with_the_runtime_down_reports_it_and_finds_nothing(make_mesh: MeshFactory) -> None:
    from retrieval_fixtures import unavailable

    mesh = await make_mesh(mode="dense")
    await indexed(mesh)
    mesh.embedder.failure = unavailable()
    outcome = await mesh.search("configure the retry budget", [ALPHA])
    assert outcome.degraded == ["embedding"]
    assert outcome.results == []


def test_mode_setting_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGMESH_RETRIEVAL_MODE", "Dense")
    assert load_settings().limits.mode == "dense"
    monkeypatch.setenv("RAGMESH_RETRIEVAL_MODE", "bm25")
    with pytest.raises(SystemExit, match="RAGMESH_RETRIEVAL_MODE"):
        load_settings()


async def test_chinese_query_in_hybrid_mode_is_searched_by_keywords(make_mesh: MeshFactory) -> None:
    from test_retrieval_search import indexed as _indexed

    mesh = await make_mesh()
    await _indexed(mesh)
    calls = mesh.embedder.calls
    outcome = await mesh.search("如何配置重试 retry", [ALPHA])
    assert outcome.query_mode == "sparse"
    assert outcome.degraded == []
    assert mesh.embedder.calls == calls
    english = await mesh.search("configure the retry budget", [ALPHA])
    assert english.query_mode == "hybrid"


async def test_chinese_query_stays_hybrid_when_configured(make_mesh: MeshFactory) -> None:
    mesh = await make_mesh(cjk_mode="hybrid")
    await indexed(mesh)
    outcome = await mesh.search("如何配置重试 retry", [ALPHA])
    assert outcome.query_mode == "hybrid"
