"""Score arithmetic shared by adapters that fuse outside the engine: RRF written to give the very
floats qdrant-client's local mode gives (its ``reciprocal_rank_fusion``), and the cosines both
adapters give a fused hit's dense score with."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ragmesh_common.vectorstore.port import rank_score


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], rrf_k: int, limit: int) -> list[tuple[str, float]]:
    """(id, fused score), best first. Ties keep first-seen order (the first ranking's ids first),
    as qdrant-client's stable sort does."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, point_id in enumerate(ranking):
            scores[point_id] = scores.get(point_id, 0.0) + rank_score(rank, rrf_k)
    return sorted(scores.items(), key=lambda item: item[1], reverse=True)[:limit]


def cosines(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> list[float]:
    """The cosine of ``query`` and each vector (0.0 for a zero vector), in one matrix product:
    converting the vectors (lists of floats from the engine) one at a time cost more than the
    arithmetic (0.4 ms of a 6 ms search)."""
    if not vectors:
        return []
    q = np.asarray(query, dtype=np.float32)
    m = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1) * np.linalg.norm(q)
    dots = m @ q
    return [float(d) / float(n) if n else 0.0 for d, n in zip(dots, norms)]
