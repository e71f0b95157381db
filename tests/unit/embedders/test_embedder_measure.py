"""The measured check behind the declarations: the CPU runtime's int8 MiniLM (float32 and int8
products) against the fp32 weights as TEI computes them (libs/ragmesh_bench/minilm_reference.py),
on the product-docs probes."""

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


@pytest.mark.parametrize("pair", [("runtime-int8", "runtime-int8-products"), ("runtime-int8-products", "tei-fp16"),
                                  ("runtime-int8-products", "tei-fp32")])
def test_int8_products_stay_near_the_float_models_and_each_pair_is_declared(encoders: Encoders, probes,
                                                                            pair) -> None:
    # The runtime's default model multiplies in int8: further from the float model than the shipped
    # file, still admitted, and not the same vectors (or the int8 products are not running).
    from ragmesh_common.embedders.compatibility import MINILM_INT8_PRODUCTS

    identities = {"runtime-int8": MINILM_INT8_ONNX, "runtime-int8-products": MINILM_INT8_PRODUCTS,
                  "tei-fp16": minilm_tei("float16"), "tei-fp32": minilm_tei("float32")}
    docs, queries = probes
    a = encoders.embed(pair[0], docs), encoders.embed(pair[0], queries)
    b = encoders.embed(pair[1], docs), encoders.embed(pair[1], queries)
    agreement = compare(a[0], b[0], a[1], b[1])
    assert THRESHOLDS.admit(agreement), agreement
    assert agreement.cosine_mean < 0.9995, agreement
    assert any(d.covers(identities[pair[0]], identities[pair[1]]) for d in DECLARED)
