"""An index searched by vector only under its own embedder or one declared compatible (issue 15:
an index built on the CPU runtime answered keyword-only once TEI served the same MiniLM)."""

from __future__ import annotations

import logging

import msgspec
import pytest

from ragmesh_common.embedders.compatibility import MINILM_INT8_ONNX, minilm_tei

from retrieval_fixtures import Doc, MeshFactory

CORPUS = "docs@1"
DOCS = [Doc("Configure the retry budget with the retries setting", "docs/retries.md"),
        Doc("Install the package with pip", "docs/install.md")]
GPU_TEI = minilm_tei("float16")
TEI_CLS = msgspec.structs.replace(GPU_TEI, pooling="cls")


@pytest.fixture
async def cpu_built(make_mesh: MeshFactory):
    mesh = await make_mesh(dimensions=384)
    await mesh.index(CORPUS, DOCS, embedder=MINILM_INT8_ONNX)
    return mesh


async def test_an_index_from_the_cpu_runtime_serves_by_vector_under_the_gpu_tei(cpu_built) -> None:
    cpu_built.embedder.served = GPU_TEI
    outcome = await cpu_built.search("configure the retry budget", [CORPUS])
    assert (outcome.query_mode, outcome.degraded) == ("hybrid", [])
    assert "dense" in outcome.results[0].scores
    [listed] = await cpu_built.directory.list_corpora([CORPUS])
    assert (listed.search, listed.keyword_only_reason) == ("hybrid", "")
    assert listed.embedder == MINILM_INT8_ONNX.label


async def test_an_undeclared_embedder_gets_keyword_search_and_the_reason(cpu_built, caplog) -> None:
    cpu_built.embedder.served = TEI_CLS
    with caplog.at_level(logging.WARNING, logger="ragmesh.retrieval.search"):
        outcome = await cpu_built.search("configure the retry budget", [CORPUS])
    assert (outcome.query_mode, outcome.degraded) == ("sparse", ["embedding_model"])
    assert outcome.results and "dense" not in outcome.results[0].scores
    assert "keyword" in outcome.hint and "not declared compatible" in outcome.hint
    [listed] = await cpu_built.directory.list_corpora([CORPUS])
    assert listed.search == "keyword_only"
    assert MINILM_INT8_ONNX.label in listed.keyword_only_reason and TEI_CLS.label in listed.keyword_only_reason
    assert any("not declared compatible" in str(getattr(r, "fields", {})) for r in caplog.records)


async def test_corpora_say_unknown_while_the_embedder_cannot_be_asked(cpu_built) -> None:
    from retrieval_fixtures import unavailable

    cpu_built.embedder.failure = unavailable()
    [listed] = await cpu_built.directory.list_corpora([CORPUS])
    assert listed.search == "unknown" and "embedding runtime" in listed.keyword_only_reason
