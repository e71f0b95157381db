"""bench/scale.py's derived vectors: any batch can be made again (the exact ground truth relies on
it), the first ``base`` chunks are the real vectors, and each derivation is what its docstring says."""

from __future__ import annotations

import numpy as np
import pytest

from ragmesh_bench.harness import bench_script

scale = bench_script("scale")


@pytest.fixture(scope="module")
def base() -> np.ndarray:
    vectors = np.random.default_rng(3).standard_normal((40, scale.DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("kind", sorted(scale.DERIVATIONS))
def test_a_batch_is_the_same_whichever_call_makes_it(base: np.ndarray, kind: str) -> None:
    derivation = scale.Derivation(kind, scale.DERIVATIONS[kind])
    whole = derivation.vectors(base, 0, 4 * scale.BATCH)
    assert np.array_equal(derivation.vectors(base, scale.BATCH, 2 * scale.BATCH), whole[scale.BATCH:3 * scale.BATCH])
    assert np.allclose(whole[:len(base)], base, atol=1e-6)
    assert np.allclose(np.linalg.norm(whole, axis=1), 1.0, atol=1e-5)
    assert len({row.tobytes() for row in whole[len(base):]}) == len(whole) - len(base)


def test_a_mixed_vector_lies_in_the_plane_of_its_two_real_vectors(base: np.ndarray) -> None:
    """``mix``: what is left of a derived vector outside span(v_b, v_c) is the small noise alone."""
    derived = scale.Derivation("mix", scale.DERIVATIONS["mix"]).vectors(base, 0, scale.BATCH)
    rng = np.random.default_rng([7, 0])  # the batch's own draws, in the order vectors() makes them
    rng.uniform(0, 0.5, (scale.BATCH, 1))
    others = rng.integers(0, len(base), scale.BATCH)
    for j in range(len(base), scale.BATCH):
        plane = np.stack([base[j % len(base)], base[others[j]]], axis=1)
        coeffs, *_ = np.linalg.lstsq(plane, derived[j], rcond=None)
        outside = np.linalg.norm(derived[j] - plane @ coeffs)
        assert outside < 0.1, (j, outside)
        assert coeffs[0] > coeffs[1] - 1e-6  # its own chunk weighs at least as much as the other
    noisy = scale.Derivation("noise", scale.DERIVATIONS["noise"]).vectors(base, 0, scale.BATCH)
    residual = [np.linalg.norm(noisy[j] - np.stack([base[j % len(base)], base[others[j]]], axis=1)
                               @ np.linalg.lstsq(np.stack([base[j % len(base)], base[others[j]]], axis=1),
                                                 noisy[j], rcond=None)[0]) for j in range(len(base), scale.BATCH)]
    assert min(residual) > 0.2  # session 21's derivation: the noise is most of what moves a copy
