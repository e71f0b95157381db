"""WordLlama (static 256-d token embeddings, average-pooled) as a cheap second relevance signal."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np


class WordLlamaSimilarity:
    dimension = 256

    def __init__(self, model) -> None:
        self._model = model

    @classmethod
    def load(cls, package_dir: Path) -> WordLlamaSimilarity:
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
        return cls(model)

    def cosine_to_query(self, query: str, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0,), dtype=np.float32)
        vectors = self._model.embed([query, *texts], norm=True)
        vectors = np.nan_to_num(vectors)  # an all-unknown text pools to 0/0
        return (vectors[1:] @ vectors[0]).astype(np.float32)
