"""How far two embedders' vectors agree: what decides whether they may share an index.

Given the same probe texts embedded by embedder A and by embedder B (rows in the same order, unit
length), ``compare`` reports
- the cosine of each text's two vectors (mean, 1st percentile, minimum), and
- top-k agreement: for each probe query, the share of the k nearest documents that stays the same
  when an index built by one embedder is queried with the other's vector instead of its own (both
  directions; the lower one counts).
``Thresholds.admit`` turns that into the decision; embedders.compatibility holds the thresholds
this project uses, how they were measured, and the pairs that passed. numpy is imported here only:
no service image runs this module (bench/embedder_compat.py and the tests do).
"""

from __future__ import annotations

import msgspec
import numpy as np


class Agreement(msgspec.Struct, frozen=True):
    texts: int
    queries: int
    k: int
    cosine_mean: float
    cosine_p1: float
    cosine_min: float
    topk_agreement: float  # the lower of the two directions
    topk_agreement_a_index: float  # index built by A, queried with B
    topk_agreement_b_index: float  # index built by B, queried with A


def _top(docs: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    scores = queries @ docs.T
    return np.argsort(-scores, axis=1, kind="stable")[:, :k]


def _overlap(a: np.ndarray, b: np.ndarray, k: int) -> float:
    return float(np.mean([len(set(x) & set(y)) / k for x, y in zip(a, b)]))


def topk_overlap(docs: np.ndarray, other_docs: np.ndarray, queries: np.ndarray, k: int = 10) -> float:
    """Share of each query's top-k kept when the same documents are embedded otherwise."""
    k = min(k, len(docs))
    return round(_overlap(_top(np.asarray(docs), queries, k), _top(np.asarray(other_docs), queries, k), k), 4)


def compare(docs_a: np.ndarray, docs_b: np.ndarray, queries_a: np.ndarray, queries_b: np.ndarray,
            *, k: int = 10) -> Agreement:
    docs_a, docs_b = np.asarray(docs_a, np.float64), np.asarray(docs_b, np.float64)
    queries_a, queries_b = np.asarray(queries_a, np.float64), np.asarray(queries_b, np.float64)
    if docs_a.shape != docs_b.shape or queries_a.shape != queries_b.shape:
        raise ValueError(f"the two embedders' vectors differ in shape: documents {docs_a.shape} vs "
                         f"{docs_b.shape}, queries {queries_a.shape} vs {queries_b.shape}")
    k = min(k, len(docs_a))
    cosines = np.concatenate([(docs_a * docs_b).sum(1), (queries_a * queries_b).sum(1)])
    native_a, native_b = _top(docs_a, queries_a, k), _top(docs_b, queries_b, k)
    a_index = _overlap(native_a, _top(docs_a, queries_b, k), k)
    b_index = _overlap(native_b, _top(docs_b, queries_a, k), k)
    return Agreement(
        texts=len(cosines), queries=len(queries_a), k=k,
        cosine_mean=round(float(cosines.mean()), 6), cosine_p1=round(float(np.percentile(cosines, 1)), 6),
        cosine_min=round(float(cosines.min()), 6), topk_agreement=round(min(a_index, b_index), 4),
        topk_agreement_a_index=round(a_index, 4), topk_agreement_b_index=round(b_index, 4),
    )
