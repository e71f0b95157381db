"""The measured check behind the declarations: the CPU runtime's int8 MiniLM against the fp32
weights as TEI computes them (libs/ragmesh_bench/minilm_reference.py), on the product-docs probes."""

from __future__ import annotations


import numpy as np
import pytest

from ragmesh_bench.embedder_compat import Encoders, product_docs_probes

from ragmesh_common.embedders.compatibility import DECLARED, MINILM_INT8_ONNX, THRESHOLDS, minilm_tei
from ragmesh_common.embedders.measure import compare, topk_overlap


@pytest.fixture(scope="module")
def probes() -> tuple[list[str], list[str]]:
    docs, queries = product_docs_probes()
    return docs[:24], queries[::4][:20]


@pytest.fixture(scope="module")
def encoders() -> Encoders:
    return Encoders()


def test_int8_and_fp16_tei_minilm_agree_and_the_pair_is_declared(encoders: Encoders, probes) -> None:
    docs, queries = probes
    int8 = encoders.embed("runtime-int8", docs), encoders.embed("runtime-int8", queries)
    fp16 = encoders.embed("tei-fp16", docs), encoders.embed("tei-fp16", queries)
    agreement = compare(int8[0], fp16[0], int8[1], fp16[1])
    assert THRESHOLDS.admit(agreement), agreement
    declared = [d for d in DECLARED if {d.a.dtype, d.b.dtype} == {"int8", "float16"}]
    assert declared and declared[0].a.same_embedder(MINILM_INT8_ONNX) and declared[0].b.same_embedder(
        minilm_tei("float16"))


def test_the_same_weights_with_cls_pooling_are_refused(encoders: Encoders, probes) -> None:
    docs, queries = probes
    int8 = encoders.embed("runtime-int8", docs), encoders.embed("runtime-int8", queries)
    cls = encoders.embed("tei-cls", docs), encoders.embed("tei-cls", queries)
    agreement = compare(int8[0], cls[0], int8[1], cls[1])
    assert not THRESHOLDS.admit(agreement), agreement
    assert agreement.cosine_p1 < THRESHOLDS.cosine_p1


def test_compare_measures_both_directions_and_refuses_mismatched_shapes() -> None:
    rng = np.random.default_rng(3)
    docs = rng.standard_normal((30, 8))
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    same = compare(docs, docs, docs[:5], docs[:5], k=3)
    assert (same.cosine_min, same.topk_agreement) == (1.0, 1.0)
    assert topk_overlap(docs, docs, docs[:5], k=3) == 1.0
    assert topk_overlap(docs, -docs, docs[:5], k=3) == 0.0  # every ranking reversed
    with pytest.raises(ValueError, match="differ in shape"):
        compare(docs, docs[:, :4], docs[:5], docs[:5, :4])


def test_the_dynamic_int8_candidate_multiplies_in_int8_and_stays_near_the_runtime(encoders: Encoders, probes,
                                                                                   tmp_path) -> None:
    # bench/embedder_compat.py's runtime-int8-dynamic: a measured candidate for a faster query pass,
    # built from the same file; its graph must really multiply in int8, or its timing means nothing.
    import collections

    import onnx

    from ragmesh_bench.embedder_compat import dynamic_int8_model
    from ragmesh_runtime.model_files import MINILM_ONNX

    def ops(model) -> collections.Counter:
        return collections.Counter(node.op_type for node in onnx.load(model).graph.node)

    original, dynamic_ops = ops(MINILM_ONNX.path()), ops(dynamic_int8_model(MINILM_ONNX.path(), tmp_path))
    assert dynamic_ops["MatMulInteger"] >= 36 and dynamic_ops["DynamicQuantizeLinear"] >= 1  # 6 layers x 6 weights
    assert dynamic_ops["MatMul"] < original["MatMul"]
    docs, queries = probes
    runtime = encoders.embed("runtime-int8", docs), encoders.embed("runtime-int8", queries)
    dynamic = encoders.embed("runtime-int8-dynamic", docs), encoders.embed("runtime-int8-dynamic", queries)
    agreement = compare(runtime[0], dynamic[0], runtime[1], dynamic[1])
    assert 0.98 < agreement.cosine_mean < 0.9999, agreement  # close, and not the same vectors
