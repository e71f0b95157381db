"""An embedder's identity read from /info in TEI's terms, and the compatibility decision both ways."""

from __future__ import annotations

import msgspec

from ragmesh_common.embedders.compatibility import (
    DECLARED,
    MINILM_INT8_ONNX,
    MINILM_TEI_COMMIT,
    decide,
    index_embedder,
    minilm_tei,
)
from ragmesh_common.embedders.identity import EmbedderIdentity, from_tei_info
from ragmesh_common.index_schema import CollectionMeta, CorpusMeta

# What TEI 1.8 answers in the GPU profile (deploy/compose.gpu.yml): --model-id is a snapshot path,
# no --revision (model_sha null), the CUDA image's default dtype.
GPU_TEI_INFO = {
    "model_id": f"/models/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/{MINILM_TEI_COMMIT}",
    "model_sha": None, "model_dtype": "float16", "model_type": {"embedding": {"pooling": "mean"}},
    "served_model_name": "/models/models--sentence-transformers--all-MiniLM-L6-v2/snapshots/" + MINILM_TEI_COMMIT,
    "max_input_length": 256, "version": "1.8.0",
}


def meta(embedder: EmbedderIdentity | None, embedding_model: str = "x", vector_size: int = 384) -> CollectionMeta:
    return CollectionMeta(index_version="v1", corpus=CorpusMeta(corpus="docs@1", library="docs", version="1"),
                          embedding_model=embedding_model, vector_size=vector_size, lexical_version="l",
                          embedder=embedder)


def test_tei_snapshot_path_reads_as_the_repo_and_its_commit() -> None:
    identity = from_tei_info(GPU_TEI_INFO, normalization="l2")
    assert identity == EmbedderIdentity(model="sentence-transformers/all-MiniLM-L6-v2", revision=MINILM_TEI_COMMIT,
                                        dtype="float16", pooling="mean", normalization="l2")
    assert identity.same_embedder(minilm_tei("float16"))
    assert "sentence-transformers/all-MiniLM-L6-v2@1110a243fdf4" in identity.label and "float16" in identity.label


def test_a_hub_model_id_keeps_its_name_and_model_sha_is_the_revision() -> None:
    identity = from_tei_info({"model_id": "BAAI/bge-m3", "model_sha": "5617a9f61b028005a4858fdac845db406aefb181",
                              "model_dtype": "float32", "model_type": {"embedding": {"pooling": "cls"}}})
    assert (identity.model, identity.revision, identity.dtype, identity.pooling) == (
        "BAAI/bge-m3", "5617a9f61b028005a4858fdac845db406aefb181", "float32", "cls")


def test_runtime_int8_index_is_accepted_under_the_fp16_and_fp32_tei_as_declared() -> None:
    index = MINILM_INT8_ONNX
    for dtype in ("float16", "float32"):
        serving = from_tei_info({**GPU_TEI_INFO, "model_dtype": dtype}, normalization="l2")
        verdict = decide(index, serving, query_dimension=384)
        assert verdict.accepted, verdict.reason
        assert "declared compatible" in verdict.basis and "cosine" in verdict.basis
        # And the other way: an index built on the GPU profile serves on the CPU runtime.
        assert decide(serving.with_dimension(384), MINILM_INT8_ONNX, query_dimension=384).accepted


def test_every_declaration_passed_the_thresholds_it_names() -> None:
    from ragmesh_common.embedders.compatibility import THRESHOLDS

    assert DECLARED
    for declaration in DECLARED:
        assert THRESHOLDS.admit(declaration.measured), declaration
        assert declaration.measured.command.startswith(".venv/bin/python bench/embedder_compat.py")


def test_an_undeclared_embedder_is_refused_with_both_models_named() -> None:
    cls_pooling = from_tei_info({**GPU_TEI_INFO, "model_type": {"embedding": {"pooling": "cls"}}}, normalization="l2")
    verdict = decide(MINILM_INT8_ONNX, cls_pooling, query_dimension=384)
    assert not verdict.accepted
    assert MINILM_INT8_ONNX.label in verdict.reason and cls_pooling.label in verdict.reason
    assert "not declared compatible" in verdict.reason
    other_commit = msgspec.structs.replace(minilm_tei("float16"), revision="0" * 40)
    assert not decide(MINILM_INT8_ONNX, other_commit, query_dimension=384).accepted


def test_a_dimension_mismatch_is_refused_whatever_is_declared() -> None:
    verdict = decide(MINILM_INT8_ONNX, minilm_tei("float16"), query_dimension=256)
    assert not verdict.accepted and "384" in verdict.reason and "256" in verdict.reason


def test_the_same_embedder_is_accepted() -> None:
    assert decide(MINILM_INT8_ONNX, MINILM_INT8_ONNX.with_dimension(0), query_dimension=384).accepted


def test_an_index_without_a_recorded_identity_is_judged_by_its_model_id_as_before() -> None:
    identity, legacy = index_embedder(meta(None, embedding_model="all-MiniLM-L6-v2-onnx-int8"))
    assert legacy and identity.model == "all-MiniLM-L6-v2-onnx-int8"
    assert decide(identity, MINILM_INT8_ONNX, query_dimension=384, legacy=True).accepted
    path = GPU_TEI_INFO["model_id"]
    identity, legacy = index_embedder(meta(None, embedding_model=path))
    assert decide(identity, from_tei_info(GPU_TEI_INFO, normalization="l2"), query_dimension=384, legacy=True).accepted
    refused = decide(identity, MINILM_INT8_ONNX, query_dimension=384, legacy=True)
    assert not refused.accepted and "records no embedder identity" in refused.reason


def test_a_recorded_identity_round_trips_through_collection_metadata() -> None:
    recorded = meta(MINILM_INT8_ONNX)
    again = msgspec.json.decode(msgspec.json.encode(recorded), type=CollectionMeta)
    assert index_embedder(again) == (MINILM_INT8_ONNX, False)


def test_the_declared_tei_commit_is_the_one_the_gpu_profile_serves() -> None:
    from pathlib import Path

    compose = (Path(__file__).resolve().parents[3] / "deploy" / "compose.gpu.yml").read_text()
    assert f"models--sentence-transformers--all-MiniLM-L6-v2/snapshots/{MINILM_TEI_COMMIT}" in compose
