"""Sentence-embedding arithmetic shared by the encoder, the reranker and the generator."""

from __future__ import annotations

import numpy as np

_EPS = 1e-12


def mean_pool(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Average the token vectors of each sequence, padding excluded (sentence-transformers' "mean").

    ``hidden`` is (batch, seq, dim), ``attention_mask`` (batch, seq) of 0/1.
    """
    mask = attention_mask.astype(hidden.dtype)[..., None]
    summed = (hidden * mask).sum(axis=1)
    counts = np.clip(mask.sum(axis=1), 1e-9, None)
    return summed / counts


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length; an all-zero row stays zero instead of becoming NaN."""
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return vectors / np.maximum(norms, _EPS)


def token_windows(ids: list[int], size: int, stride: int) -> list[list[int]]:
    """Overlapping slices of ``ids``: each ``size`` long (the last may be shorter), starting every ``stride``.

    The last window always reaches the end, so no token is left unscored. Empty input gives one
    empty window, so every text has a score.
    """
    if size <= 0 or stride <= 0:
        raise ValueError("window size and stride must be positive")
    if len(ids) <= size:
        return [list(ids)]
    windows = []
    start = 0
    while True:
        windows.append(list(ids[start : start + size]))
        if start + size >= len(ids):
            return windows
        start += stride
