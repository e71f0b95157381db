"""WordLlama (static 256-d token embeddings, average-pooled) as a cheap second relevance signal."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from ragmesh_runtime.text_features import TextFeatureCache


class WordLlamaSimilarity:
    dimension = 256

    def __init__(self, model, cache_entries: int = 0) -> None:
        self._model = model
        # Unit vectors by text: a reranked chunk recurs across queries (1 KB each).
        self.cache = TextFeatureCache(cache_entries, "f", tag="wordllama:l2_supercat_256")

    @classmethod
    def load(cls, package_dir: Path, cache_entries: int = 0) -> WordLlamaSimilarity:
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        from wordllama import WordLlama

        # wordllama calls logging.basicConfig() at import; the process's logging is not its call.
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
        root.setLevel(level)
        # The package ships its weights; cache_dir is only where it would look next, and
        # disable_download turns a missing file into an error instead of a hub request.
        model = WordLlama.load(config="l2_supercat", dim=256, cache_dir=package_dir, disable_download=True)
        return cls(model, cache_entries)

    def cosine_to_query(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0,), dtype=np.float32)
        vectors = self.vectors([query, *texts])
        return (vectors[1:] @ vectors[0]).astype(np.float32)

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (an all-unknown text pools to 0/0 and becomes zeros)."""
        found = self.cache.fetch(texts, lambda missing: np.nan_to_num(
            self._model.embed(missing, norm=True)).astype(np.float32).tolist())
        return np.array([np.frombuffer(v, dtype=np.float32) for v in found], dtype=np.float32)
