"""Relevance scorers behind /rerank, chosen by name (RAGMESH_RUNTIME_RERANK_METHOD).

None of them is a cross-encoder: they compare a query vector with text vectors, or count terms.
Each says so in ``description``, which /info repeats, so nobody mistakes these scores for a
trained reranker's.
"""

from __future__ import annotations

import abc
import functools
import json
import math
import re
from array import array
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

import numpy as np

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.scoring import standardised
from ragmesh_runtime.e5_similarity import E5Similarity
from ragmesh_runtime.encoder import MiniLmEncoder
from ragmesh_runtime.generator.extractive import is_mostly_cjk
from ragmesh_runtime.pooling import token_windows
from ragmesh_runtime.settings import RerankSettings
from ragmesh_runtime.text_features import TextFeatureCache
from ragmesh_runtime.wordllama_similarity import WordLlamaSimilarity


@dataclass(frozen=True)
class Planned:
    """One request, worked out once: the MiniLM sequences its scoring needs (which a batched pass
    computes for several requests at once, ragmesh_runtime.batching), and ``score``, which scores it
    from their vectors once that pass has run."""

    sequences: list[list[int]]
    score: Callable[[], np.ndarray]


class RelevanceScorer(abc.ABC):
    name: str
    description: str

    @abc.abstractmethod
    def score(self, query: str, texts: Sequence[str], truncate: bool) -> np.ndarray:
        """One score per text, higher is more relevant."""

    def bounded(self, scores: np.ndarray) -> np.ndarray:
        """The scores in [0, 1] for TEI's raw_scores=false, in the same order. A cosine is clamped
        (kept as is where it is already positive); scorers with other ranges override this."""
        return scores.clip(0.0, 1.0)

    def prepare(self, texts: Sequence[str]) -> None:
        """Cache what scoring ``texts`` later needs (they were just embedded); nothing by default."""

    def planned(self, query: str, texts: Sequence[str], truncate: bool) -> Planned:
        """One request's MiniLM sequences, so a batched pass can compute them for several requests at
        once (ragmesh_runtime.batching), and its scoring; none by default (no model input), and scorers
        that embed override it to work their inputs out once for both."""
        return Planned([], lambda: self.score(query, texts, truncate))


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
        return self.planned(query, texts, truncate).score()

    def planned(self, query: str, texts: Sequence[str], truncate: bool) -> Planned:
        sequences, owners = self._windows(query, texts, truncate)
        return Planned(sequences, functools.partial(self._best_windows, sequences, owners, len(texts)))

    def _best_windows(self, sequences: list[list[int]], owners: list[int], count: int) -> np.ndarray:
        vectors = self._encoder.embed_sequences(sequences, normalize=True)
        similarities = vectors[1:] @ vectors[0]
        scores = np.full(count, -1.0, dtype=np.float32)
        np.maximum.at(scores, np.asarray(owners, dtype=np.int64), similarities)
        return scores

    def _windows(self, query: str, texts: Sequence[str], truncate: bool) -> tuple[list[list[int]], list[int]]:
        """The query's sequence, then every window of every text; and the text each window is of."""
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
                        ErrorCode.QUERY_TOO_LONG,
                        f"texts[{index}] needs {len(windows)} windows of {self._window} tokens; "
                        f"at most {self._max_windows} are scored (set truncate=true to score only those)",
                    )
                windows = windows[: self._max_windows]
            sequences.extend(self._encoder.sequence(w, self._window + 2) for w in windows)
            owners.extend([index] * len(windows))
        return sequences, owners


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
        return self.planned(query, texts, truncate).score()

    def planned(self, query: str, texts: Sequence[str], truncate: bool) -> Planned:
        primary = self._primary.planned(query, texts, truncate)

        def score() -> np.ndarray:
            lexical = self._wordllama.cosine_to_query(query, texts)
            return (1.0 - self._weight) * primary.score() + self._weight * lexical

        return Planned(primary.sequences, score)


class RequestBm25Scorer(RelevanceScorer):
    """BM25 of each text for the query, with IDF and mean length taken from the request's texts.

    A TEI /rerank request carries no corpus statistics, so the candidates are the collection: a
    query term found in every candidate weighs little, one found in a few weighs much. Tokens are
    the index's own (ragmesh_common.lexical: stemmed English, jieba for Chinese, stopwords out).
    A query mostly in Chinese adds ``cjk_bigram_weight`` x the z-score of a second BM25 over Han
    character bigrams, which catches words jieba segments differently in query and text.
    """

    name = "bm25-request"

    def __init__(
        self, encoder: LexicalEncoder | None = None, k1: float = 1.2, b: float = 0.75, cjk_bigram_weight: float = 0.5,
        terms: TextFeatureCache | None = None,
    ) -> None:
        self._encoder = encoder or LexicalEncoder()
        # Term ids by text (stemming is the cost); see ragmesh_runtime.text_features.
        self._terms = terms if terms is not None else bm25_term_cache(0, self._encoder)
        self._k1 = k1
        self._b = b
        self._bigram_weight = cjk_bigram_weight
        self.description = (
            f"BM25 (k1={k1}, b={b}) of the query's terms, IDF and mean length over this request's texts"
            + (f" (queries mostly in Chinese: z(word BM25) + {cjk_bigram_weight:g} x z(Han-bigram BM25))"
               if cjk_bigram_weight else "")
        )

    def score(self, query: str, texts: Sequence[str], truncate: bool) -> np.ndarray:
        words = self._bm25(self._encoder.term_ids(query), self._text_terms(texts))
        if not self._bigram_weight or not is_mostly_cjk(query):
            return words.astype(np.float32)
        bigrams = self._bm25(han_bigrams(query), [han_bigrams(text) for text in texts])
        return (standardised(words) + self._bigram_weight * standardised(bigrams)).astype(np.float32)

    def prepare(self, texts: Sequence[str]) -> None:
        self._text_terms(texts)

    def _text_terms(self, texts: Sequence[str]) -> list[Sequence[int]]:
        return self._terms.fetch(texts, lambda missing: [self._encoder.term_ids(t) for t in missing])

    def _bm25(self, query_terms: Sequence[Hashable], text_terms: Sequence[Sequence[Hashable]]) -> np.ndarray:
        terms = set(query_terms)
        n = len(text_terms)
        frequencies = _frequencies(terms, text_terms)
        lengths = np.array([len(tokens) for tokens in text_terms], dtype=np.float64)
        average = float(lengths.mean()) if len(lengths) and lengths.mean() > 0 else 1.0
        scores = np.zeros(n, dtype=np.float64)
        for term in terms:
            tf = frequencies(term)
            found = int((tf > 0).sum())
            if not found:
                continue
            idf = math.log(1.0 + (n - found + 0.5) / (found + 0.5))
            norm = self._k1 * (1.0 - self._b + self._b * lengths / average)
            scores += idf * tf * (self._k1 + 1.0) / (tf + norm)
        return scores


def _frequencies(terms: set[Hashable],
                 text_terms: Sequence[Sequence[Hashable]]) -> Callable[[Hashable], np.ndarray]:
    """How often a query term occurs in each text, as float64. Term ids held in ``array('q')`` (the
    term cache's) are counted all at once in numpy, which for 50 candidates takes a fraction of the
    time of a Counter per text; other tokens (Han bigrams) by Counter. Both give the same counts."""
    n = len(text_terms)
    if (n and terms and all(isinstance(term, int) for term in terms)
            and all(isinstance(tokens, array) and tokens.typecode == "q" for tokens in text_terms)):
        flat = np.concatenate([np.frombuffer(tokens, dtype=np.int64) for tokens in text_terms])
        owners = np.repeat(np.arange(n), [len(tokens) for tokens in text_terms])
        kept = np.isin(flat, np.fromiter(terms, dtype=np.int64, count=len(terms)))
        flat, owners = flat[kept], owners[kept]
        return lambda term: np.bincount(owners[flat == term], minlength=n).astype(np.float64)
    counts = [Counter(tokens) for tokens in text_terms]
    return lambda term: np.array([c.get(term, 0) for c in counts], dtype=np.float64)


def bm25_term_cache(entries: int, encoder: LexicalEncoder | None = None) -> TextFeatureCache:
    """Term ids by text for request BM25, tagged with the tokenizer config that made them."""
    config = (encoder or LexicalEncoder()).config_dict()
    return TextFeatureCache(entries, "q", tag="bm25-terms:" + json.dumps(config, sort_keys=True))


_HAN_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


def han_bigrams(text: str) -> list[str]:
    """Overlapping Han character pairs of each run (a one-character run is itself)."""
    out: list[str] = []
    for run in _HAN_RUN.findall(text):
        out.extend([run[i : i + 2] for i in range(len(run) - 1)] or [run])
    return out


class ZBlendScorer(RelevanceScorer):
    """Weighted sum of each signal's z-score over the request's texts.

    Signals live on different scales (cosines near 0.3-0.7, BM25 0-20); standardising each over the
    candidates makes the weights mean "how much each signal moves the order". The result orders
    the texts of one request and is not comparable across requests.
    """

    name = "blend"

    def __init__(
        self,
        signals: Sequence[tuple[float, RelevanceScorer | WordLlamaSimilarity | E5Similarity]],
        english_only: Sequence[object] = (),
        chinese_only: Sequence[object] = (),
    ) -> None:
        self._signals = [(w, s) for w, s in signals if w != 0.0 and s is not None]
        # Signals from models trained on English sit out queries written mostly in Chinese, where
        # their scores are noise (the generator follows the same rule; see docs/evaluation.md);
        # the multilingual one serves only those, where it is worth its cost.
        self._english_only = tuple(english_only)
        self._chinese_only = tuple(chinese_only)
        if not self._signals:
            raise ValueError("the blend needs at least one signal with a non-zero weight")
        parts = []
        for weight, signal in self._signals:
            if isinstance(signal, RelevanceScorer):
                described = signal.description
            elif isinstance(signal, E5Similarity):
                described = ("multilingual-e5-small (4-bit) cosine of query and passage, for queries mostly "
                             "in Chinese only")
            else:
                described = "WordLlama (l2_supercat, static 256-d token embeddings, average-pooled) cosine of the whole text"
            parts.append(f"{weight:g} x z[{described}]")
        self.description = (
            " + ".join(parts) + "; each z-score is standardised over this request's texts, so scores only "
            "order one request's texts (raw_scores=false applies the logistic function); "
            + ("queries mostly in Chinese skip the English-trained embedding signals (MiniLM, WordLlama); "
               if self._english_only else "")
            + "NOT a cross-encoder"
        )

    def _serves(self, signal: object, chinese: bool) -> bool:
        if chinese:
            return not any(signal is skipped for skipped in self._english_only)
        return not any(signal is only for only in self._chinese_only)

    def bounded(self, scores: np.ndarray) -> np.ndarray:
        # A z-score sum is unbounded on both sides: clamping would tie every below-average text
        # at 0, so squash it with the logistic function, which keeps the order.
        return (1.0 / (1.0 + np.exp(-scores.astype(np.float64)))).astype(np.float32)

    def prepare(self, texts: Sequence[str]) -> None:
        for _, signal in self._signals:
            if isinstance(signal, RelevanceScorer):
                signal.prepare(texts)
            elif isinstance(signal, E5Similarity):
                # Only texts a Chinese query could be matched with well: those mostly in Chinese.
                signal.passages([t for t in texts if is_mostly_cjk(t)])

    def score(self, query: str, texts: Sequence[str], truncate: bool) -> np.ndarray:
        return self.planned(query, texts, truncate).score()

    def planned(self, query: str, texts: Sequence[str], truncate: bool) -> Planned:
        chinese = is_mostly_cjk(query)
        sequences: list[list[int]] = []
        signals: list[tuple[float, Callable[[], np.ndarray]]] = []
        for weight, signal in self._signals:
            if not self._serves(signal, chinese):
                continue
            if isinstance(signal, RelevanceScorer):
                plan = signal.planned(query, texts, truncate)
                sequences.extend(plan.sequences)
                signals.append((weight, plan.score))
            else:
                signals.append((weight, functools.partial(signal.cosine_to_query, query, texts)))

        def score() -> np.ndarray:
            total = np.zeros(len(texts), dtype=np.float64)
            for weight, values in signals:
                total += weight * standardised(values())
            return total.astype(np.float32)

        return Planned(sequences, score)


def build_scorer(
    settings: RerankSettings, encoder: MiniLmEncoder, wordllama: WordLlamaSimilarity | None,
    bm25_terms: TextFeatureCache | None = None, e5: E5Similarity | None = None,
) -> RelevanceScorer:
    window = MiniLmWindowScorer(encoder, settings.window_tokens, settings.window_stride, settings.max_windows)
    if settings.method == "minilm-window":
        return window
    if settings.method == "minilm-window+wordllama":
        if wordllama is None:
            raise ValueError("the minilm-window+wordllama method needs WordLlama loaded")
        return BlendedScorer(window, wordllama, settings.wordllama_weight)
    if settings.method == "blend":
        if settings.blend_wordllama and wordllama is None:
            raise ValueError("the blend method with a WordLlama weight needs WordLlama loaded")
        if settings.blend_e5_cjk and e5 is None:
            raise ValueError("the blend method with an e5 weight needs multilingual-e5 loaded")
        return ZBlendScorer([
            (settings.blend_minilm, window),
            (settings.blend_wordllama, wordllama),
            (settings.blend_bm25, RequestBm25Scorer(terms=bm25_terms)),
            (settings.blend_e5_cjk, e5),
        ], english_only=[window] + ([wordllama] if wordllama is not None else []),
           chinese_only=[e5] if e5 is not None else [])
    raise ValueError(f"unknown rerank method {settings.method!r}")
