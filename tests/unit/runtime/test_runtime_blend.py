"""The "blend" rerank method's arithmetic and the runtime's vector cache, without model weights."""

from __future__ import annotations

import numpy as np
import pytest

from ragmesh_runtime.encoder import SequenceVectorCache
from ragmesh_common.scoring import standardised
from ragmesh_runtime.relevance import RelevanceScorer, RequestBm25Scorer, ZBlendScorer


class FixedScorer(RelevanceScorer):
    name = "fixed"
    description = "fixed scores"

    def __init__(self, scores: list[float]) -> None:
        self.scores = np.array(scores, dtype=np.float32)
        self.calls = 0

    def score(self, query, texts, truncate):
        self.calls += 1
        return self.scores[: len(texts)]


def test_standardised_has_zero_mean_unit_spread_and_handles_ties():
    z = standardised(np.array([1.0, 2.0, 3.0]))
    assert z.mean() == pytest.approx(0.0) and z.std() == pytest.approx(1.0)
    assert list(standardised(np.array([0.4, 0.4]))) == [0.0, 0.0]
    assert list(standardised(np.array([0.7]))) == [0.0]


def test_request_bm25_prefers_the_text_with_the_rare_query_term():
    texts = [
        "Vitamin D levels and bone density in older adults.",
        "Bone density measured in adults; calcium intake recorded.",
        "Stock markets rose today.",
    ]
    scores = RequestBm25Scorer().score("vitamin D and bone density", texts, True)
    assert scores[0] > scores[1] > scores[2] == 0.0


def test_request_bm25_stems_and_segments_chinese():
    texts = ["北京大学是一所大学。", "上海的天气很好。"]
    scores = RequestBm25Scorer().score("北京大学在哪里", texts, True)
    assert scores[0] > scores[1]
    english = RequestBm25Scorer().score("running shoes", ["He runs in shoes.", "A red apple."], True)
    assert english[0] > english[1]


def test_blend_is_the_weighted_sum_of_z_scores():
    a, b = FixedScorer([0.2, 0.5, 0.8]), FixedScorer([9.0, 1.0, 5.0])
    blend = ZBlendScorer([(1.0, a), (0.5, b)])
    expected = standardised(a.scores) + 0.5 * standardised(b.scores)
    np.testing.assert_allclose(blend.score("q", ["x", "y", "z"], True), expected, rtol=1e-5)
    assert "1 x z[fixed scores] + 0.5 x z[fixed scores]" in blend.description
    assert "NOT a cross-encoder" in blend.description


def test_blend_skips_zero_weights_and_english_only_signals_for_chinese_queries():
    english, lexical, unused = FixedScorer([0.9, 0.1]), FixedScorer([1.0, 3.0]), FixedScorer([5.0, 0.0])
    blend = ZBlendScorer([(1.0, english), (1.0, lexical), (0.0, unused)], english_only=[english])
    chinese = blend.score("北京大学在哪里", ["a", "b"], True)
    assert chinese[1] > chinese[0]  # the lexical signal alone decides
    assert english.calls == 0 and unused.calls == 0
    assert "skip the English-trained embedding signals" in blend.description
    blend.score("where is the university", ["a", "b"], True)
    assert english.calls == 1


def test_blend_bounded_scores_keep_the_order_in_0_1():
    blend = ZBlendScorer([(1.0, FixedScorer([0.0]))])
    raw = np.array([-3.0, 0.5, 2.0, -0.1], dtype=np.float32)
    bounded = blend.bounded(raw)
    assert ((bounded > 0) & (bounded < 1)).all()
    assert list(np.argsort(bounded)) == list(np.argsort(raw))


def test_blend_needs_a_signal():
    with pytest.raises(ValueError):
        ZBlendScorer([(0.0, FixedScorer([1.0]))])


def test_sequence_cache_is_an_lru_keyed_by_exact_ids():
    cache = SequenceVectorCache(2)
    cache.put((101, 7, 102), np.ones(3))
    cache.put((101, 8, 102), np.zeros(3))
    assert cache.get((101, 7, 102)) is not None  # now the most recent
    cache.put((101, 9, 102), np.full(3, 2.0))
    assert cache.get((101, 8, 102)) is None  # the least recent went
    assert len(cache) == 2 and cache.hits == 1 and cache.misses == 1
    off = SequenceVectorCache(0)
    off.put((1,), np.ones(3))
    assert off.get((1,)) is None and len(off) == 0


def test_han_bigrams_cover_each_run():
    from ragmesh_runtime.relevance import han_bigrams

    assert han_bigrams("北京大学 in 上") == ["北京", "京大", "大学", "上"]
    assert han_bigrams("no chinese") == []


def test_request_bm25_adds_bigrams_only_for_chinese_queries():
    plain = RequestBm25Scorer(cjk_bigram_weight=0.0)
    mixed = RequestBm25Scorer(cjk_bigram_weight=0.5)
    english = ["Vitamin D and bone density.", "Stock markets rose."]
    np.testing.assert_allclose(plain.score("vitamin bone", english, True), mixed.score("vitamin bone", english, True))
    # jieba keeps 博物馆 whole in the text but the query's 博物 + 馆 split differently; bigrams still match.
    texts = ["这座博物馆收藏了许多古代文物。", "这座城市的天气很好。", "公园里有很多树。"]
    assert mixed.score("博物馆收藏什么", texts, True)[0] == max(mixed.score("博物馆收藏什么", texts, True))


def test_sequence_cache_survives_a_restart_through_its_file(tmp_path):
    path = tmp_path / "vectors.npz"
    cache = SequenceVectorCache(10)
    cache.put((101, 7, 8, 102), np.arange(4, dtype=np.float32))
    cache.put((101, 9, 102), np.ones(4, dtype=np.float32))
    assert cache.save(path, "sha-a") == 2
    restored = SequenceVectorCache(10)
    assert restored.load(path, "sha-a") == 2
    np.testing.assert_array_equal(restored.get((101, 7, 8, 102)), np.arange(4, dtype=np.float32))
    assert restored.get((101, 9, 102)) is not None
    # Another model's vectors, or no file at all, load nothing.
    assert SequenceVectorCache(10).load(path, "sha-b") == 0
    assert SequenceVectorCache(10).load(tmp_path / "missing.npz", "sha-a") == 0


def test_a_chinese_only_signal_serves_chinese_queries_alone():
    english, chinese, both = FixedScorer([0.1, 0.9]), FixedScorer([0.9, 0.1]), FixedScorer([0.5, 0.6])
    blend = ZBlendScorer([(1.0, english), (1.0, chinese), (1.0, both)],
                         english_only=[english], chinese_only=[chinese])
    blend.score("which port", ["a", "b"], True)
    assert (english.calls, chinese.calls, both.calls) == (1, 0, 1)
    blend.score("哪个端口", ["a", "b"], True)
    assert (english.calls, chinese.calls, both.calls) == (1, 1, 2)


def _reference_bm25(query_terms, text_terms, k1=1.2, b=0.75):
    """BM25 written out term by term, one Counter per text (what the scorer computed before it
    counted term ids in numpy)."""
    from collections import Counter
    import math

    counts = [Counter(tokens) for tokens in text_terms]
    lengths = np.array([sum(c.values()) for c in counts], dtype=np.float64)
    average = float(lengths.mean()) if len(lengths) and lengths.mean() > 0 else 1.0
    scores = np.zeros(len(counts))
    for term in set(query_terms):
        tf = np.array([c.get(term, 0) for c in counts], dtype=np.float64)
        found = int((tf > 0).sum())
        if found:
            idf = math.log(1.0 + (len(counts) - found + 0.5) / (found + 0.5))
            scores += idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * lengths / average))
    return scores


@pytest.mark.parametrize("seed", range(20))
def test_request_bm25_over_cached_term_ids_equals_the_per_text_counts(seed):
    from array import array

    rng = np.random.default_rng(seed)
    vocabulary = int(rng.integers(5, 400))
    texts = [array("q", rng.integers(0, vocabulary, int(rng.integers(0, 120))).tolist())
             for _ in range(int(rng.integers(1, 60)))]
    query = rng.integers(0, vocabulary + 5, int(rng.integers(1, 12))).tolist()  # some in no text
    scores = RequestBm25Scorer()._bm25(query, texts)
    assert np.array_equal(scores, _reference_bm25(query, texts))
    assert np.array_equal(RequestBm25Scorer()._bm25(query, [list(t) for t in texts]), scores)  # the Counter path


def test_request_bm25_of_han_bigrams_still_counts_strings():
    texts = [["北京", "京大", "北京"], ["上海"], []]
    assert np.array_equal(RequestBm25Scorer()._bm25(["北京", "上海"], texts),
                          _reference_bm25(["北京", "上海"], texts))
