"""Score arithmetic shared by the runtime's blend and the rerank service's fusion."""

from __future__ import annotations

import numpy as np


def standardised(values: np.ndarray) -> np.ndarray:
    """(x - mean) / std over the texts; all-equal values (or a single text) give zeros."""
    values = np.asarray(values, dtype=np.float64)
    spread = values.std()
    if not np.isfinite(spread) or spread < 1e-9:
        return np.zeros_like(values)
    return (values - values.mean()) / spread
