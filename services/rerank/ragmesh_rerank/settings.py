"""Rerank service settings, each field read from its RAGMESH_* variable."""

from __future__ import annotations

from functools import lru_cache


from ragmesh_common.settings import METRICS_PORTS, ListenSettings, from_env, listen_addr

# bench/tune_rerank.py on SciFact train (docs/evaluation.md).
DEFAULT_PRIOR_DENSE = 1.0
DEFAULT_PRIOR_SPARSE = 0.25


class RerankSettings(ListenSettings, frozen=True):
    # listen: RAGMESH_RERANK_ADDR (host:port); --port overrides the port
    metrics_port: int = METRICS_PORTS["rerank"]  # RAGMESH_RERANK_METRICS_PORT; 0 disables the /metrics listener
    rerank_url: str = "http://127.0.0.1:8091"  # RAGMESH_RERANK_URL: TEI-compatible base URL
    # Used when the caller sent no deadline; a caller's deadline always wins when it is shorter.
    runtime_timeout_s: float = 10.0  # RAGMESH_RERANK_TIMEOUT_S
    max_texts: int = 200  # RAGMESH_RERANK_MAX_TEXTS: more is INVALID_ARGUMENT
    max_text_chars: int = 8192  # RAGMESH_RERANK_MAX_TEXT_CHARS: longer texts are cut before sending
    max_query_chars: int = 4000  # RAGMESH_RERANK_MAX_QUERY_CHARS: longer is QUERY_TOO_LONG
    # Texts per runtime request when the runtime does not advertise its cap in /info.
    batch_size: int = 32  # RAGMESH_RERANK_BATCH_SIZE
    # Weights of retrieval's own signals fused with the runtime's score (ragmesh_rerank.fusion);
    # 0 and 0 return the runtime's order untouched. Defaults tuned on SciFact train for the CPU runtime.
    prior_dense: float = DEFAULT_PRIOR_DENSE  # RAGMESH_RERANK_PRIOR_DENSE
    prior_sparse: float = DEFAULT_PRIOR_SPARSE  # RAGMESH_RERANK_PRIOR_SPARSE

    @classmethod
    def from_env(cls, port: int | None = None) -> RerankSettings:
        return from_env(cls, "RAGMESH_RERANK_", listen=listen_addr("rerank", port),
                        names={"rerank_url": "RAGMESH_RERANK_URL", "runtime_timeout_s": "RAGMESH_RERANK_TIMEOUT_S"})


@lru_cache(maxsize=1)
def get_settings() -> RerankSettings:
    return RerankSettings.from_env()
