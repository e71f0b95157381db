"""Fusion of the runtime's rerank score with what retrieval measured for each candidate.

    fused = z(runtime score) + dense_weight x z(dense cosine) + sparse_weight x z(BM25)

Each z-score is standardised over the request's candidates, so a weight says how far that signal
moves the order, whatever its scale. The BM25 score comes from the collection's own statistics,
which a TEI /rerank request cannot carry; on the CPU runtime it is the strongest single signal.
Weights are tuned on SciFact train (bench/tune_rerank.py); with both at zero, or without priors
in the request, the runtime's order is returned untouched. The fused score orders one request's
candidates and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ragmesh_common.scoring import standardised

from ragmesh_rerank.ports import RankedText


@dataclass(frozen=True)
class Prior:
    dense: float | None = None  # cosine of the query and the stored chunk vector
    sparse: float | None = None  # BM25 over the collection (0.0: no query term occurs)


class PriorFusion:
    def __init__(self, dense_weight: float, sparse_weight: float) -> None:
        if dense_weight < 0 or sparse_weight < 0:
            raise ValueError("prior weights must not be negative")
        self.dense_weight = dense_weight
        self.sparse_weight = sparse_weight

    @property
    def active(self) -> bool:
        return bool(self.dense_weight or self.sparse_weight)

    def score_kind(self, runtime_kind: str) -> str:
        return (f"fused: z[{runtime_kind}] + {self.dense_weight:g} x z[retrieval's dense cosine] + "
                f"{self.sparse_weight:g} x z[retrieval's BM25 over the collection]; z-scores over this "
                "request's candidates, so the score only orders them")

    def fuse(self, ranked: list[RankedText], priors: list[Prior]) -> list[RankedText]:
        """Every ranked text rescored; best first."""
        n = len(priors)
        runtime = np.zeros(n)
        for item in ranked:
            runtime[item.index] = item.score
        total = standardised(runtime)
        for weight, values in ((self.dense_weight, [p.dense for p in priors]),
                               (self.sparse_weight, [p.sparse for p in priors])):
            if weight:
                total = total + weight * standardised(_imputed(values))
        fused = [RankedText(item.index, float(total[item.index])) for item in ranked]
        return sorted(fused, key=lambda r: r.score, reverse=True)


def _imputed(values: list[float | None]) -> np.ndarray:
    """Missing values take the mean of the known ones (a z-score of 0: no opinion)."""
    known = [v for v in values if v is not None]
    if not known:
        return np.zeros(len(values))
    mean = float(np.mean(known))
    return np.array([mean if v is None else v for v in values], dtype=np.float64)
