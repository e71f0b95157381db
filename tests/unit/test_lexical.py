"""BM25 lexical encoder: tokenization (English + Chinese), vectors, determinism, versioning."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.lexical import LexicalConfig, LexicalEncoder, SparseVector, token_index


@pytest.fixture(scope="module")
def encoder() -> LexicalEncoder:
    return LexicalEncoder()


def test_english_stemming(encoder: LexicalEncoder) -> None:
    assert encoder.tokens("Running runs RUN") == ["run", "run", "run"]
    assert encoder.tokens("studies caresses") == ["studi", "caress"]
    unstemmed = LexicalEncoder(LexicalConfig(stemming=False))
    assert unstemmed.tokens("Running runs") == ["running", "runs"]


def test_stopwords(encoder: LexicalEncoder) -> None:
    assert encoder.tokens("The cat is on the mat") == ["cat", "mat"]
    keep_all = LexicalEncoder(LexicalConfig(stopwords=()))
    assert keep_all.tokens("The cat is on the mat") == ["the", "cat", "is", "on", "the", "mat"]
    assert "的" not in encoder.tokens("我的文件")


def test_case_and_width_folding(encoder: LexicalEncoder) -> None:
    assert encoder.tokens("ＡＰＩ Straße") == encoder.tokens("api STRASSE")


def test_chinese_segmentation_gives_multi_character_words(encoder: LexicalEncoder) -> None:
    tokens = encoder.tokens("我们在北京大学学习自然语言处理")
    assert {"北京大学", "自然语言", "学习", "处理"} <= set(tokens)
    assert any(len(t) > 1 for t in tokens)
    precise = LexicalEncoder(LexicalConfig(cjk_mode="precise"))
    assert precise.tokens("我们在北京大学学习自然语言处理") == ["北京大学", "学习", "自然语言", "处理"]
    # search mode adds the sub-words, so a query for 北京 finds a document about 北京大学
    assert {"北京", "大学"} <= set(tokens)


def test_mixed_chinese_and_english(encoder: LexicalEncoder) -> None:
    tokens = encoder.tokens("Ragmesh 支持中文和English混合检索，版本2.0")
    assert tokens[0] == "ragmesh"
    assert {"支持", "中文", "english", "混合", "检索", "版本", "2", "0"} <= set(tokens)


def test_same_text_same_vector_across_instances() -> None:
    text = "Indexing documents with BM25 and 中文分词 works across runs."
    a, b = LexicalEncoder(), LexicalEncoder()
    assert a.encode_document(text, 12.0) == b.encode_document(text, 12.0)
    assert a.encode_query(text) == b.encode_query(text)
    # the hash is part of the index format: pinned so a change cannot pass unnoticed
    assert token_index("run") == 1518968264
    assert token_index("北京大学") == 1465553630


def test_document_vector_is_bm25_term_frequency(encoder: LexicalEncoder) -> None:
    k1, b = 1.2, 0.75
    vector = encoder.encode_document("cat cat dog", avg_len=6.0)
    norm = k1 * (1 - b + b * 3 / 6.0)
    expected = {token_index("cat"): 2 * (k1 + 1) / (2 + norm), token_index("dog"): 1 * (k1 + 1) / (1 + norm)}
    assert dict(zip(vector.indices, vector.values)) == pytest.approx(expected)
    assert vector.indices == sorted(vector.indices)
    longer = encoder.encode_document("cat cat dog", avg_len=1.5)  # same doc, shorter corpus average
    assert dict(zip(longer.indices, longer.values))[token_index("cat")] < expected[token_index("cat")]


def test_query_vector_holds_one_per_unique_term(encoder: LexicalEncoder) -> None:
    query = encoder.encode_query("running cats and running dogs")
    assert sorted(query.indices) == query.indices
    assert len(query.indices) == 3 and query.values == [1.0, 1.0, 1.0]
    assert encoder.encode_query("the and of") == SparseVector([], [])
    assert encoder.encode_document("", 10.0) == SparseVector([], [])


def test_batch_encoding_uses_mean_length(encoder: LexicalEncoder) -> None:
    texts = ["cat dog", "cat dog bird fish", "中文 检索"]
    vectors, avg_len = encoder.encode_documents(texts)
    assert avg_len == pytest.approx(sum(encoder.token_count(t) for t in texts) / 3)
    assert vectors == [encoder.encode_document(t, avg_len) for t in texts]


def test_version_tracks_config() -> None:
    base = LexicalEncoder().version
    assert base == LexicalEncoder(LexicalConfig()).version
    assert base.startswith("bm25-r")
    variants = [
        LexicalConfig(stemming=False),
        LexicalConfig(stopwords=("english",)),
        LexicalConfig(language="porter"),
        LexicalConfig(cjk_mode="precise"),
        LexicalConfig(k1=0.9),
        LexicalConfig(b=0.5),
    ]
    versions = {LexicalEncoder(c).version for c in variants}
    assert base not in versions and len(versions) == len(variants)


def test_config_round_trip_and_validation() -> None:
    encoder = LexicalEncoder(LexicalConfig(cjk_mode="precise", k1=0.9))
    rebuilt = LexicalEncoder.from_dict(encoder.config_dict())
    assert rebuilt.version == encoder.version
    for bad in ({"language": "klingon"}, {"stopwords": ["nope"]}, {"cjk_mode": "fast"}, {"b": 2.0}):
        with pytest.raises(RagmeshError) as info:
            LexicalEncoder.from_dict(bad)
        assert info.value.code is ErrorCode.INVALID_ARGUMENT
    with pytest.raises(RagmeshError):
        LexicalEncoder.from_dict({"unknown_option": 1})


def test_concurrent_use_is_deterministic() -> None:
    encoder = LexicalEncoder()
    texts = [f"Scientists studied running mice {i} times in 北京大学实验室" for i in range(200)]
    expected = [LexicalEncoder().encode_document(t, 10.0) for t in texts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        got = list(pool.map(lambda t: encoder.encode_document(t, 10.0), texts))
    assert got == expected
