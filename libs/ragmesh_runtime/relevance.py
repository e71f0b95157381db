"""Relevance scorers behind /rerank, chosen by name (RAGMESH_RUNTIME_RERANK_METHOD).

None of them is a cross-encoder: they compare a query vector with text vectors. Each says so in
``description``, which /info repeats, so nobody mistakes these scores for a trained reranker's.
"""

from __future__ import annotations

import abc
from typing import Sequence

import numpy as np

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_runtime.encoder import MiniLmEncoder
from ragmesh_runtime.pooling import token_windows
from ragmesh_runtime.settings import RerankSettings
from ragmesh_runtime.wordllama_similarity import WordLlamaSimilarity


class RelevanceScorer(abc.ABC):
    name: str
    description: str

    @abc.abstractmethod
    def score(self, query: str, texts: Sequence[str], truncate: bool) -> np.ndarray:
        """One score per text, higher is more relevant; cosine-like, in [-1, 1]."""


class MiniLmWindowScorer(RelevanceScorer):
    """Cosine between the query and each window of a text; the text scores its best window.

    Windows let a long chunk match on the one passage that answers the query, where a single
    vector of the whole chunk (cut at 256 tokens) would dilute or lose it.
    """

    name = "minilm-window"

    def __init__(self, encoder: MiniLmEncoder, window_tokens: int, stride: int, max_windows: int) -> None:
        self._encoder = encoder
        self._window = window_tokens
        self._stride = stride
        self._max_windows = max_windows
        self.description = (
            f"bi-encoder cosine (all-MiniLM-L6-v2 int8), max over {window_tokens}-token windows "
            f"(stride {stride}, at most {max_windows} windows per text); NOT a cross-encoder"
        )

    def score(self, query: str, texts: Sequence[str], truncate: bool) -> np.ndarray:
        query_ids, *text_ids = self._encoder.token_ids([query, *texts])
        if len(query_ids) + 2 > self._encoder.max_input_tokens and not truncate:
            raise RagmeshError(
                ErrorCode.QUERY_TOO_LONG,
                f"query must have at most {self._encoder.max_input_tokens} tokens; "
                f"given {len(query_ids) + 2} (set truncate=true to cut it)",
            )
        sequences = [self._encoder.sequence(query_ids)]
        owners: list[int] = []
        for index, ids in enumerate(text_ids):
            windows = token_windows(ids, self._window, self._stride)
            if len(windows) > self._max_windows:
                if not truncate:
                    raise RagmeshError(
                        ErrorCode.BODY_TOO_LARGE,
                        f"texts[{index}] needs {len(windows)} windows of {self._window} tokens; "
                        f"at most {self._max_windows} are scored (set truncate=true to score only those)",
                    )
                windows = windows[: self._max_windows]
            sequences.extend(self._encoder.sequence(w, self._window + 2) for w in windows)
            owners.extend([index] * len(windows))
        vectors = self._encoder.embed_sequences(sequences, normalize=True)
        similarities = vectors[1:] @ vectors[0]
        scores = np.full(len(text_ids), -1.0, dtype=np.float32)
        np.maximum.at(scores, np.asarray(owners, dtype=np.int64), similarities)
        return scores


class BlendedScorer(RelevanceScorer):
    """(1 - w) * primary + w * WordLlama cosine of the whole text: a lexical-leaning second opinion."""

    def __init__(self, primary: RelevanceScorer, wordllama: WordLlamaSimilarity, weight: float) -> None:
        if not 0.0 <= weight <= 1.0:
            raise ValueError("wordllama weight must be within [0, 1]")
        self._primary = primary
        self._wordllama = wordllama
        self._weight = weight
        self.name = f"{primary.name}+wordllama"
        self.description = (
            f"{1 - weight:.2f} x [{primary.description}] + {weight:.2f} x WordLlama (static 256-d "
            "token embeddings, average-pooled) cosine over the whole text; NOT a cross-encoder"
        )

    def score(self, query: str, texts: Sequence[str], truncate: bool) -> np.ndarray:
        primary = self._primary.score(query, texts, truncate)
        lexical = self._wordllama.cosine_to_query(query, texts)
        return (1.0 - self._weight) * primary + self._weight * lexical


def build_scorer(
    settings: RerankSettings, encoder: MiniLmEncoder, wordllama: WordLlamaSimilarity | None
) -> RelevanceScorer:
    window = MiniLmWindowScorer(encoder, settings.window_tokens, settings.window_stride, settings.max_windows)
    if settings.method == "minilm-window":
        return window
    if settings.method == "minilm-window+wordllama":
        if wordllama is None:
            raise ValueError("the minilm-window+wordllama method needs WordLlama loaded")
        return BlendedScorer(window, wordllama, settings.wordllama_weight)
    raise ValueError(f"unknown rerank method {settings.method!r}")
