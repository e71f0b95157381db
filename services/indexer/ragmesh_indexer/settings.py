"""Indexer settings, each field read from its RAGMESH_* variable."""

from __future__ import annotations

from functools import lru_cache

import msgspec

from ragmesh_common.settings import METRICS_PORTS, ListenSettings, addr, env_int, env_list, env_str, listen_addr, state_dir
from ragmesh_common.vectorstore.index_config import VectorIndexConfig, load_index_config


class IndexerSettings(ListenSettings, frozen=True):
    metrics_port: int
    postgres_url: str
    # One indexer (one writer) per schema; tests and benches run isolated indexers on their own.
    registry_schema: str
    qdrant_url: str
    retrieval_addr: str
    embed_url: str
    embed_batch: int
    embed_concurrency: int
    upsert_batch: int
    max_file_bytes: int
    chunking: str
    chunk_max_chars: int
    chunk_overlap_lines: int
    url_base: str
    retire_after_s: int
    state_dir: str
    # Where each version's manifest is written (<manifest_dir>/<corpus>/<index_version>.json).
    manifest_dir: str
    # Folders builds may read (corpus_roots.py); empty: the roots of registered corpora.
    corpus_roots: list[str] = []
    # Every embedding runtime a build spreads its batches over (RAGMESH_EMBED_URLS, comma-separated);
    # empty: embed_url alone.
    embed_urls: list[str] = []
    # The layout of the collections it creates on a Qdrant server (RAGMESH_QDRANT_URL): HNSW, quantization,
    # shards and replicas (ragmesh_common.vectorstore.index_config). In the embedded default retrieval's own
    # settings decide, since retrieval creates the collections the indexer asks for.
    vector_index: VectorIndexConfig = VectorIndexConfig()

    @property
    def embedding_runtimes(self) -> list[str]:
        return self.embed_urls or [self.embed_url]

    @classmethod
    def from_env(cls, port: int | None = None) -> "IndexerSettings":
        return cls(
            listen=listen_addr("indexer", port),
            metrics_port=env_int("RAGMESH_INDEXER_METRICS_PORT", METRICS_PORTS["indexer"]),
            postgres_url=env_str("RAGMESH_POSTGRES_URL", required=True,
                                 why="the indexer keeps its version registry in PostgreSQL"),
            registry_schema=env_str("RAGMESH_INDEXER_PG_SCHEMA", "indexer"),
            qdrant_url=env_str("RAGMESH_QDRANT_URL", ""),
            retrieval_addr=addr("retrieval"),
            embed_url=env_str("RAGMESH_EMBED_URL", "http://127.0.0.1:8091"),
            embed_urls=env_list("RAGMESH_EMBED_URLS"),
            embed_batch=env_int("RAGMESH_INDEXER_EMBED_BATCH", 32),
            embed_concurrency=env_int("RAGMESH_INDEXER_EMBED_CONCURRENCY", 2),
            upsert_batch=env_int("RAGMESH_INDEXER_UPSERT_BATCH", 256),
            max_file_bytes=env_int("RAGMESH_INDEXER_MAX_FILE_BYTES", 5 * 1024 * 1024),
            chunking=env_str("RAGMESH_INDEXER_CHUNKING", "heading"),
            chunk_max_chars=env_int("RAGMESH_INDEXER_CHUNK_MAX_CHARS", 600),
            chunk_overlap_lines=env_int("RAGMESH_INDEXER_CHUNK_OVERLAP_LINES", 2),
            url_base=env_str("RAGMESH_URL_BASE", ""),
            retire_after_s=env_int("RAGMESH_INDEXER_RETIRE_AFTER_S", 24 * 3600),
            state_dir=str(state_dir()),
            manifest_dir=env_str("RAGMESH_INDEXER_MANIFEST_DIR", "") or str(state_dir() / "manifests"),
            corpus_roots=env_list("RAGMESH_CORPUS_ROOTS"),
            vector_index=load_index_config("indexer"),
        )


@lru_cache(maxsize=1)
def get_settings() -> IndexerSettings:
    return IndexerSettings.from_env()
