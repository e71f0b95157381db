"""Rerank service settings, each field read from its RAGMESH_* variable."""

from __future__ import annotations

from functools import lru_cache

import msgspec

from ragmesh_common.settings import METRICS_PORTS, addr, env_float, env_int, env_str

# bench/tune_rerank.py on SciFact train (docs/evaluation.md).
DEFAULT_PRIOR_DENSE = 1.0
DEFAULT_PRIOR_SPARSE = 0.25


class RerankSettings(msgspec.Struct, frozen=True):
    listen: str  # RAGMESH_RERANK_ADDR (host:port); --port overrides the port
    metrics_port: int  # RAGMESH_RERANK_METRICS_PORT; 0 disables the /metrics listener
    rerank_url: str  # RAGMESH_RERANK_URL: TEI-compatible base URL
    # Used when the caller sent no deadline; a caller's deadline always wins when it is shorter.
    runtime_timeout_s: float  # RAGMESH_RERANK_TIMEOUT_S
    max_texts: int  # RAGMESH_RERANK_MAX_TEXTS: more is INVALID_ARGUMENT
    max_text_chars: int  # RAGMESH_RERANK_MAX_TEXT_CHARS: longer texts are cut before sending
    max_query_chars: int  # RAGMESH_RERANK_MAX_QUERY_CHARS: longer is QUERY_TOO_LONG
    # Texts per runtime request when the runtime does not advertise its cap in /info.
    batch_size: int = 32  # RAGMESH_RERANK_BATCH_SIZE
    # Weights of retrieval's own signals fused with the runtime's score (ragmesh_rerank.fusion);
    # 0 and 0 return the runtime's order untouched. Defaults tuned on SciFact train for the CPU runtime.
    prior_dense: float = DEFAULT_PRIOR_DENSE  # RAGMESH_RERANK_PRIOR_DENSE
    prior_sparse: float = DEFAULT_PRIOR_SPARSE  # RAGMESH_RERANK_PRIOR_SPARSE

    @classmethod
    def from_env(cls, port: int | None = None) -> RerankSettings:
        listen = addr("rerank")
        if port is not None:
            listen = f"{listen.rsplit(':', 1)[0]}:{port}"
        return cls(
            listen=listen,
            metrics_port=env_int("RAGMESH_RERANK_METRICS_PORT", METRICS_PORTS["rerank"]),
            rerank_url=env_str("RAGMESH_RERANK_URL", "http://127.0.0.1:8091"),
            runtime_timeout_s=env_float("RAGMESH_RERANK_TIMEOUT_S", 10.0),
            max_texts=env_int("RAGMESH_RERANK_MAX_TEXTS", 200),
            max_text_chars=env_int("RAGMESH_RERANK_MAX_TEXT_CHARS", 8192),
            max_query_chars=env_int("RAGMESH_RERANK_MAX_QUERY_CHARS", 4000),
            batch_size=env_int("RAGMESH_RERANK_BATCH_SIZE", 32),
            prior_dense=env_float("RAGMESH_RERANK_PRIOR_DENSE", DEFAULT_PRIOR_DENSE),
            prior_sparse=env_float("RAGMESH_RERANK_PRIOR_SPARSE", DEFAULT_PRIOR_SPARSE),
        )

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


@lru_cache(maxsize=1)
def get_settings() -> RerankSettings:
    return RerankSettings.from_env()
