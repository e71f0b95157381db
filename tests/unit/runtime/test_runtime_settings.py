import pytest

from ragmesh_runtime.settings import EXTRACTIVE_MODEL_ID, RuntimeSettings


def test_defaults_without_environment(monkeypatch):
    for name in ("RAGMESH_RUNTIME_PORT", "RAGMESH_RUNTIME_RERANK_METHOD", "RAGMESH_RUNTIME_INTRA_OP_THREADS"):
        monkeypatch.delenv(name, raising=False)
    settings = RuntimeSettings.from_env()
    assert settings.server.port == 8091
    assert settings.rerank.method == "blend"
    assert settings.generator.model_id == EXTRACTIVE_MODEL_ID
    assert "not-an-llm" in settings.generator.model_id
    assert settings.embedding.threads >= 1


def test_variables_override_defaults(monkeypatch):
    monkeypatch.setenv("RAGMESH_RUNTIME_PORT", "9999")
    monkeypatch.setenv("RAGMESH_RUNTIME_RERANK_METHOD", "minilm-window+wordllama")
    monkeypatch.setenv("RAGMESH_RUNTIME_INTRA_OP_THREADS", "3")
    monkeypatch.setenv("RAGMESH_RUNTIME_GENERATOR_MIN_SCORE", "0.6")
    monkeypatch.setenv("RAGMESH_RUNTIME_AUTO_TRUNCATE", "false")
    settings = RuntimeSettings.from_env()
    assert settings.server.port == 9999
    assert settings.rerank.uses_wordllama
    assert settings.embedding.threads == 3
    assert settings.generator.min_score == 0.6
    assert settings.embedding.auto_truncate is False


def test_unknown_rerank_method_stops_the_process(monkeypatch):
    monkeypatch.setenv("RAGMESH_RUNTIME_RERANK_METHOD", "cross-encoder")
    with pytest.raises(SystemExit):
        RuntimeSettings.from_env()
