"""HNSW, quantization and cluster settings: read from RAGMESH_* variables by retrieval and the
indexer, and a setting that makes no sense stops the process at start, naming the variable."""

from __future__ import annotations

import pytest

from ragmesh_common.vectorstore.index_config import DEFAULT_HNSW_MIN_POINTS, VectorIndexConfig, load_index_config


def test_defaults_stay_exact_below_the_measured_size() -> None:
    config = load_index_config("retrieval")
    assert config == VectorIndexConfig()
    assert not config.uses_hnsw(DEFAULT_HNSW_MIN_POINTS - 1) and config.uses_hnsw(DEFAULT_HNSW_MIN_POINTS)
    assert (config.shard_number, config.replication_factor, config.write_consistency_factor) == (1, 1, 1)


def test_every_variable_reaches_its_field(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in {"RAGMESH_VECTOR_HNSW_MIN_POINTS": "5000", "RAGMESH_VECTOR_HNSW_M": "32",
                        "RAGMESH_VECTOR_HNSW_EF_CONSTRUCT": "200", "RAGMESH_VECTOR_HNSW_EF": "64",
                        "RAGMESH_VECTOR_QUANTIZATION": "INT8", "RAGMESH_VECTOR_RESCORE": "false",
                        "RAGMESH_VECTOR_OVERSAMPLING": "3", "RAGMESH_VECTOR_ON_DISK": "true",
                        "RAGMESH_QDRANT_SHARD_NUMBER": "6", "RAGMESH_QDRANT_REPLICATION_FACTOR": "2",
                        "RAGMESH_QDRANT_WRITE_CONSISTENCY_FACTOR": "2", "RAGMESH_EDGE_MIN_FREE_MB": "64"}.items():
        monkeypatch.setenv(name, value)
    assert load_index_config("indexer") == VectorIndexConfig(
        hnsw_min_points=5000, hnsw_m=32, hnsw_ef_construct=200, hnsw_ef=64, quantization="int8", rescore=False,
        oversampling=3.0, on_disk=True, shard_number=6, replication_factor=2, write_consistency_factor=2,
        min_free_mb=64)


@pytest.mark.parametrize(("variable", "value", "said"), [
    ("RAGMESH_VECTOR_HNSW_M", "0", "RAGMESH_VECTOR_HNSW_M=0: must be 4..128"),
    ("RAGMESH_VECTOR_HNSW_M", "1000", "RAGMESH_VECTOR_HNSW_M=1000"),
    ("RAGMESH_VECTOR_HNSW_EF_CONSTRUCT", "0", "RAGMESH_VECTOR_HNSW_EF_CONSTRUCT=0"),
    ("RAGMESH_VECTOR_HNSW_EF", "-1", "RAGMESH_VECTOR_HNSW_EF=-1"),
    ("RAGMESH_VECTOR_HNSW_MIN_POINTS", "-5", "RAGMESH_VECTOR_HNSW_MIN_POINTS=-5"),
    ("RAGMESH_VECTOR_QUANTIZATION", "int4", "RAGMESH_VECTOR_QUANTIZATION='int4': must be one of none, int8"),
    ("RAGMESH_VECTOR_OVERSAMPLING", "0.5", "RAGMESH_VECTOR_OVERSAMPLING=0.5"),
    ("RAGMESH_QDRANT_SHARD_NUMBER", "0", "RAGMESH_QDRANT_SHARD_NUMBER=0"),
    ("RAGMESH_QDRANT_REPLICATION_FACTOR", "0", "RAGMESH_QDRANT_REPLICATION_FACTOR=0"),
    ("RAGMESH_QDRANT_WRITE_CONSISTENCY_FACTOR", "3", "must be 1..RAGMESH_QDRANT_REPLICATION_FACTOR (1)"),
    ("RAGMESH_VECTOR_HNSW_M", "sixteen", "RAGMESH_VECTOR_HNSW_M='sixteen' is not a valid int"),
])
def test_a_setting_that_makes_no_sense_stops_the_start(monkeypatch: pytest.MonkeyPatch, variable: str, value: str,
                                                       said: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SystemExit) as exc:
        load_index_config("retrieval")
    assert said in str(exc.value)


def test_retrieval_and_the_indexer_refuse_to_start_with_m_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    from ragmesh_indexer.settings import IndexerSettings
    from ragmesh_retrieval.settings import load_settings

    monkeypatch.setenv("RAGMESH_VECTOR_HNSW_M", "0")
    monkeypatch.setenv("RAGMESH_POSTGRES_URL", "postgresql://127.0.0.1/x")
    with pytest.raises(SystemExit) as retrieval:
        load_settings()
    assert str(retrieval.value).startswith("ragmesh-retrieval: RAGMESH_VECTOR_HNSW_M=0")
    with pytest.raises(SystemExit) as indexer:
        IndexerSettings.from_env()
    assert str(indexer.value).startswith("ragmesh-indexer: RAGMESH_VECTOR_HNSW_M=0")
