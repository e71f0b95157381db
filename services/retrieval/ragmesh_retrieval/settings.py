"""Retrieval settings, each field read from its RAGMESH_* variable."""

from __future__ import annotations

import functools

import msgspec

from ragmesh_common.settings import (
    METRICS_PORTS,
    MissingSetting,
    addr,
    env_bool,
    env_float,
    env_int,
    env_str,
    state_dir,
)

from ragmesh_common.vectorstore.index_config import VectorIndexConfig, load_index_config

from ragmesh_retrieval.domain.model import SEARCH_MODES, SearchLimits

# RAGMESH_VECTOR_STORE -> the store's ``kind``. "edge" and "local" are embedded: this process owns
# the storage and serves it to the indexer; "server" is a Qdrant server at RAGMESH_QDRANT_URL.
STORE_KINDS = {"edge": "qdrant-edge", "local": "qdrant-local", "server": "qdrant-server"}


class RetrievalSettings(msgspec.Struct, frozen=True):
    host: str
    port: int
    metrics_port: int | None  # RAGMESH_RETRIEVAL_METRICS_PORT; 0 turns the endpoint off
    qdrant_url: str  # RAGMESH_QDRANT_URL: the Qdrant server of vector_store "server"
    qdrant_api_key: str  # RAGMESH_QDRANT_API_KEY (or _FILE)
    qdrant_path: str  # RAGMESH_QDRANT_PATH, default <state dir>/qdrant: vector_store "local"
    embed_url: str  # RAGMESH_EMBED_URL
    embed_cache_entries: int  # RAGMESH_RETRIEVAL_EMBED_CACHE
    catalog_ttl_s: float  # RAGMESH_RETRIEVAL_CATALOG_TTL_S
    # RAGMESH_RETRIEVAL_SERVE_VECTORSTORE: serve ragmesh.v1.VectorStore to the indexer. On by default
    # with an embedded store (edge or local), where this process is the one allowed to open it.
    serve_vectorstore: bool
    limits: SearchLimits
    # RAGMESH_VECTOR_STORE: edge | local | server. load_settings() defaults to "server" when
    # RAGMESH_QDRANT_URL is set, else "edge"; this field's own default keeps settings that code
    # builds field by field (older tests) on local mode, as they were written for.
    vector_store: str = "local"
    edge_path: str = ""  # RAGMESH_EDGE_PATH, default <state dir>/qdrant-edge: vector_store "edge"
    # RAGMESH_VECTOR_* (HNSW size, m, ef, quantization, on_disk), RAGMESH_QDRANT_SHARD_NUMBER / _REPLICATION_FACTOR
    # / _WRITE_CONSISTENCY_FACTOR, RAGMESH_EDGE_MIN_FREE_MB: ragmesh_common.vectorstore.index_config
    vector_index: VectorIndexConfig = VectorIndexConfig()

    @property
    def store_kind(self) -> str:
        return STORE_KINDS[self.vector_store]

    def loggable(self) -> dict:
        from ragmesh_common.settings import describe

        described = describe(self)
        if described.get("qdrant_api_key"):
            described["qdrant_api_key"] = "***"
        return described


def load_settings(port: int | None = None, host: str | None = None) -> RetrievalSettings:
    default_host, _, default_port = addr("retrieval").rpartition(":")
    qdrant_url = env_str("RAGMESH_QDRANT_URL")
    vector_store = _vector_store(qdrant_url)
    mode = env_str("RAGMESH_RETRIEVAL_MODE", "hybrid").lower()
    if mode not in SEARCH_MODES:
        raise SystemExit(f"ragmesh-retrieval: RAGMESH_RETRIEVAL_MODE={mode!r} is not one of {', '.join(SEARCH_MODES)}")
    cjk_mode = env_str("RAGMESH_RETRIEVAL_CJK_MODE", "sparse").lower()
    if cjk_mode not in ("hybrid", "sparse"):
        raise SystemExit(f"ragmesh-retrieval: RAGMESH_RETRIEVAL_CJK_MODE={cjk_mode!r} is not hybrid or sparse")
    metrics_port = env_int("RAGMESH_RETRIEVAL_METRICS_PORT", METRICS_PORTS["retrieval"])
    return RetrievalSettings(
        host=host or default_host or "127.0.0.1",
        port=port if port is not None else int(default_port),
        metrics_port=metrics_port or None,
        qdrant_url=qdrant_url,
        qdrant_api_key=env_str("RAGMESH_QDRANT_API_KEY"),
        qdrant_path=env_str("RAGMESH_QDRANT_PATH") or ("" if qdrant_url else str(state_dir() / "qdrant")),
        embed_url=env_str("RAGMESH_EMBED_URL", "http://127.0.0.1:8091"),
        embed_cache_entries=env_int("RAGMESH_RETRIEVAL_EMBED_CACHE", 1024),
        catalog_ttl_s=env_float("RAGMESH_RETRIEVAL_CATALOG_TTL_S", 2.0),
        serve_vectorstore=env_bool("RAGMESH_RETRIEVAL_SERVE_VECTORSTORE", vector_store != "server"),
        limits=SearchLimits(
            max_query_chars=env_int("RAGMESH_RETRIEVAL_MAX_QUERY_CHARS", 2000),
            max_top_k=env_int("RAGMESH_RETRIEVAL_MAX_TOP_K", 50),
            max_libraries=env_int("RAGMESH_RETRIEVAL_MAX_LIBRARIES", 8),
            min_dense_score=env_float("RAGMESH_RETRIEVAL_MIN_DENSE_SCORE", 0.2),
            min_sparse_score=env_float("RAGMESH_RETRIEVAL_MIN_SPARSE_SCORE", 7.0),
            candidates=env_int("RAGMESH_RETRIEVAL_CANDIDATES", 50),
            rrf_k=env_int("RAGMESH_RETRIEVAL_RRF_K", 60),
            embed_timeout_s=env_float("RAGMESH_RETRIEVAL_EMBED_TIMEOUT_S", 3.0),
            mode=mode,
            cjk_mode=cjk_mode,
        ),
        vector_store=vector_store,
        edge_path=env_str("RAGMESH_EDGE_PATH") or str(state_dir() / "qdrant-edge"),
        vector_index=load_index_config("retrieval"),
    )


def _vector_store(qdrant_url: str) -> str:
    chosen = env_str("RAGMESH_VECTOR_STORE").strip().lower() or ("server" if qdrant_url else "edge")
    if chosen not in STORE_KINDS:
        raise SystemExit(f"ragmesh-retrieval: RAGMESH_VECTOR_STORE={chosen!r} is not one of {', '.join(STORE_KINDS)}")
    if chosen == "server" and not qdrant_url:
        raise MissingSetting("RAGMESH_QDRANT_URL", "RAGMESH_VECTOR_STORE=server needs the Qdrant server's URL")
    if chosen != "server" and qdrant_url:
        # The indexer writes straight to RAGMESH_QDRANT_URL when it is set: an embedded store here
        # would never see those writes.
        raise SystemExit(f"ragmesh-retrieval: RAGMESH_VECTOR_STORE={chosen} is embedded, but RAGMESH_QDRANT_URL "
                         "is set (the indexer would write to that server); unset one of them")
    return chosen


@functools.cache
def get_settings() -> RetrievalSettings:
    return load_settings()
