"""WordLlama (static 256-d token embeddings, average-pooled) as a cheap second relevance signal."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np

from ragmesh_runtime.lru import LruCache


class WordLlamaSimilarity:
    dimension = 256

    def __init__(self, model, cache_entries: int = 0) -> None:
        self._model = model
        # Unit vectors by text: a reranked chunk recurs across queries (1 KB each).
        self.cache: LruCache[str, np.ndarray] = LruCache(cache_entries)

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
        out: list[np.ndarray | None] = [self.cache.get(text) for text in texts]
        todo = [i for i, vector in enumerate(out) if vector is None]
        if todo:
            computed = np.nan_to_num(self._model.embed([texts[i] for i in todo], norm=True))
            for index, vector in zip(todo, computed):
                self.cache.put(texts[index], vector)
                out[index] = vector
        return np.stack(out)  # type: ignore[arg-type]
