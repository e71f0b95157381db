"""``cosines`` (one matrix product) gives what ``cosine`` gives vector by vector: the dense score
of a hybrid hit that only the BM25 list found is the same whichever computes it."""

from __future__ import annotations

import numpy as np

from ragmesh_common.vectorstore.fusion import cosine, cosines


def test_cosines_match_cosine_one_by_one() -> None:
    rng = np.random.default_rng(7)
    query = rng.normal(size=384).tolist()
    vectors = rng.normal(size=(23, 384)).tolist()
    assert np.allclose(cosines(query, vectors), [cosine(query, v) for v in vectors], rtol=0, atol=1e-6)


def test_a_zero_vector_scores_zero_and_no_vectors_score_nothing() -> None:
    assert cosines([1.0, 0.0], [[0.0, 0.0], [2.0, 0.0]]) == [0.0, 1.0]
    assert cosines([0.0, 0.0], [[1.0, 0.0]]) == [0.0]
    assert cosines([1.0, 0.0], []) == []
