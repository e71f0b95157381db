"""Retrieval settings, each field read from its RAGMESH_* variable."""

from __future__ import annotations

import functools

import msgspec

from ragmesh_common.settings import METRICS_PORTS, addr, env_bool, env_float, env_int, env_str, state_dir

from ragmesh_retrieval.domain.model import SEARCH_MODES, SearchLimits


class RetrievalSettings(msgspec.Struct, frozen=True):
    host: str
    port: int
    metrics_port: int | None  # RAGMESH_RETRIEVAL_METRICS_PORT; 0 turns the endpoint off
    qdrant_url: str  # RAGMESH_QDRANT_URL; empty: qdrant-client local mode at qdrant_path
    qdrant_api_key: str  # RAGMESH_QDRANT_API_KEY (or _FILE)
    qdrant_path: str  # RAGMESH_QDRANT_PATH, default <state dir>/qdrant
    embed_url: str  # RAGMESH_EMBED_URL
    embed_cache_entries: int  # RAGMESH_RETRIEVAL_EMBED_CACHE
    catalog_ttl_s: float  # RAGMESH_RETRIEVAL_CATALOG_TTL_S
    # RAGMESH_RETRIEVAL_SERVE_VECTORSTORE: serve ragmesh.v1.VectorStore to the indexer. On by default
    # only in local mode, where this process is the one allowed to open the storage.
    serve_vectorstore: bool
    limits: SearchLimits

    @property
    def store_kind(self) -> str:
        return "qdrant-server" if self.qdrant_url else "qdrant-local"

    def loggable(self) -> dict:
        from ragmesh_common.settings import describe

        described = describe(self)
        if described.get("qdrant_api_key"):
            described["qdrant_api_key"] = "***"
        return described


def load_settings(port: int | None = None, host: str | None = None) -> RetrievalSettings:
    default_host, _, default_port = addr("retrieval").rpartition(":")
    qdrant_url = env_str("RAGMESH_QDRANT_URL")
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
        serve_vectorstore=env_bool("RAGMESH_RETRIEVAL_SERVE_VECTORSTORE", not qdrant_url),
        limits=SearchLimits(
            max_query_chars=env_int("RAGMESH_RETRIEVAL_MAX_QUERY_CHARS", 2000),
            max_top_k=env_int("RAGMESH_RETRIEVAL_MAX_TOP_K", 50),
            max_libraries=env_int("RAGMESH_RETRIEVAL_MAX_LIBRARIES", 8),
            min_dense_score=env_float("RAGMESH_RETRIEVAL_MIN_DENSE_SCORE", 0.2),
            candidates=env_int("RAGMESH_RETRIEVAL_CANDIDATES", 50),
            rrf_k=env_int("RAGMESH_RETRIEVAL_RRF_K", 60),
            embed_timeout_s=env_float("RAGMESH_RETRIEVAL_EMBED_TIMEOUT_S", 3.0),
            mode=mode,
            cjk_mode=cjk_mode,
        ),
    )


@functools.cache
def get_settings() -> RetrievalSettings:
    return load_settings()
