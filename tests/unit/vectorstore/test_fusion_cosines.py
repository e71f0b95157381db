"""``cosines`` (one matrix product) gives each vector's cosine as numpy computes it one vector at a
time: the dense score of a hybrid hit is the same in both stores and whichever way it is computed."""

from __future__ import annotations

import numpy as np

from ragmesh_common.vectorstore.fusion import cosines


def one_at_a_time(query, vector) -> float:
    q, v = np.asarray(query, dtype=np.float32), np.asarray(vector, dtype=np.float32)
    return float(q @ v) / float(np.linalg.norm(q) * np.linalg.norm(v))


def test_cosines_match_each_vector_scored_alone() -> None:
    rng = np.random.default_rng(7)
    query = rng.normal(size=384).tolist()
    vectors = rng.normal(size=(23, 384)).tolist()
    assert np.allclose(cosines(query, vectors), [one_at_a_time(query, v) for v in vectors], rtol=0, atol=1e-6)


def test_a_zero_vector_scores_zero_and_no_vectors_score_nothing() -> None:
    assert cosines([1.0, 0.0], [[0.0, 0.0], [2.0, 0.0]]) == [0.0, 1.0]
    assert cosines([0.0, 0.0], [[1.0, 0.0]]) == [0.0]
    assert cosines([1.0, 0.0], []) == []
