import numpy as np
import pytest

from ragmesh_runtime.pooling import l2_normalize, mean_pool, token_windows


def test_mean_pool_ignores_padding():
    hidden = np.array(
        [
            [[1.0, 2.0], [3.0, 4.0], [100.0, 100.0]],  # last token is padding
            [[2.0, 0.0], [0.0, 2.0], [4.0, 4.0]],
        ],
        dtype=np.float32,
    )
    mask = np.array([[1, 1, 0], [1, 1, 1]])
    pooled = mean_pool(hidden, mask)
    np.testing.assert_allclose(pooled, [[2.0, 3.0], [2.0, 2.0]])


def test_mean_pool_of_fully_masked_row_is_zero_not_nan():
    pooled = mean_pool(np.ones((1, 2, 3), dtype=np.float32), np.zeros((1, 2)))
    assert np.all(pooled == 0.0)


def test_l2_normalize_gives_unit_rows_and_keeps_direction():
    vectors = np.array([[3.0, 4.0], [0.0, -2.0]])
    unit = l2_normalize(vectors)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=1), [1.0, 1.0])
    np.testing.assert_allclose(unit[0], [0.6, 0.8])
    np.testing.assert_allclose(unit[1], [0.0, -1.0])


def test_l2_normalize_leaves_zero_rows_at_zero():
    assert np.all(l2_normalize(np.zeros((1, 4))) == 0.0)


def test_short_sequence_is_one_window():
    assert token_windows([1, 2, 3], size=4, stride=2) == [[1, 2, 3]]
    assert token_windows([], size=4, stride=2) == [[]]


def test_windows_overlap_by_size_minus_stride_and_reach_the_end():
    ids = list(range(10))
    windows = token_windows(ids, size=4, stride=3)
    assert windows == [[0, 1, 2, 3], [3, 4, 5, 6], [6, 7, 8, 9]]
    ids = list(range(11))
    windows = token_windows(ids, size=4, stride=3)
    assert windows[-1] == [9, 10]
    assert sorted({t for w in windows for t in w}) == ids


def test_runtime_default_windows_cover_long_text():
    ids = list(range(300))
    windows = token_windows(ids, size=128, stride=96)
    assert [w[0] for w in windows] == [0, 96, 192]
    assert all(len(w) <= 128 for w in windows)
    assert windows[-1][-1] == 299


def test_window_arguments_must_be_positive():
    with pytest.raises(ValueError):
        token_windows([1], size=0, stride=1)
