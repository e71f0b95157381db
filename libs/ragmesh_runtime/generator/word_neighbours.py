"""How close in meaning a question's word is to the words of the sources: WordLlama's static token
embeddings (the runtime's pinned ``wordllama`` package, 256-d), one vector per word.

The coverage rule (coverage.py) refuses a question whose key terms no source holds. Questions
paraphrase: "Earth's rainforests" for a source's "the planet's", "°C" for "degrees Celsius". A
missing word whose nearest source word is this close counts as found (0.53 for "Earth's" and
"planet's"), and one with no near word stays missing ("Oracle": 0.38 to "sql", "Jenkins": 0.16).
Static vectors, not MiniLM: MiniLM puts a lone word near anything of its field ("web" 0.71 to
"http", "Oracle" 0.62 to "sql"), which would let a missing subject pass as found.

The weights load on first use (16 MB, well under a second), on the runtime's inference thread, so
a runtime whose questions never miss a term never reads them.
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from ragmesh_runtime.lru import LruCache


_SHARED: WordNeighbours | None = None
_SHARED_LOCK = threading.Lock()


class WordNeighbours:
    """``closest(words, candidates)``: for each word, its largest cosine to any candidate."""

    def __init__(self, similarity=None, cache_entries: int = 50_000) -> None:
        self._similarity = similarity  # a WordLlamaSimilarity, or None: load the pinned one when first asked
        self._vectors: LruCache[str, np.ndarray] = LruCache(cache_entries)
        self._lock = threading.Lock()

    @classmethod
    def shared(cls) -> WordNeighbours:
        """One per process: every answerer built without its own reads the same vectors."""
        global _SHARED
        with _SHARED_LOCK:
            if _SHARED is None:
                _SHARED = cls()
            return _SHARED

    def closest(self, words: Sequence[str], candidates: Sequence[str]) -> list[float]:
        if not words or not candidates:
            return [0.0] * len(words)
        unique = list(dict.fromkeys([*words, *candidates]))
        vectors = dict(zip(unique, self._embed(unique)))
        pool = np.stack([vectors[c] for c in dict.fromkeys(candidates)])
        return [float((pool @ vectors[w]).max()) for w in words]

    def _embed(self, words: list[str]) -> list[np.ndarray]:
        found = {w: v for w in words if (v := self._vectors.get(w)) is not None}
        missing = [w for w in words if w not in found]
        if missing:
            for word, vector in zip(missing, self._model().vectors(missing)):
                found[word] = vector
                self._vectors.put(word, vector)
        return [found[w] for w in words]

    def _model(self):
        with self._lock:
            if self._similarity is None:
                from ragmesh_runtime.model_files import WORDLLAMA_WEIGHTS, verify
                from ragmesh_runtime.wordllama_similarity import WordLlamaSimilarity

                weights = verify(WORDLLAMA_WEIGHTS)
                self._similarity = WordLlamaSimilarity.load(weights.path.parent.parent)
            return self._similarity
