"""Generation service settings, each field read from its RAGMESH_* variable."""

from __future__ import annotations

from functools import lru_cache


from ragmesh_common.settings import METRICS_PORTS, ListenSettings, from_env, listen_addr


class GenerationSettings(ListenSettings, frozen=True):
    listen: str = "127.0.0.1:50053"  # RAGMESH_GENERATION_ADDR (host:port); --port overrides the port
    metrics_port: int = METRICS_PORTS["generation"]  # RAGMESH_GENERATION_METRICS_PORT; 0: no listener
    llm_url: str = "http://127.0.0.1:8091/v1"  # RAGMESH_LLM_URL: OpenAI-compatible base URL
    llm_model: str = ""  # RAGMESH_LLM_MODEL; empty: the one model the runtime lists
    llm_api_key: str = ""  # RAGMESH_LLM_API_KEY (or _FILE)
    # Waiting for the first delta includes reading the prompt, which on CPU is the slow part.
    first_token_timeout_s: float = 60.0  # RAGMESH_GENERATION_FIRST_TOKEN_TIMEOUT_S
    # Between two deltas: longer than this and the runtime is stalled.
    idle_timeout_s: float = 15.0  # RAGMESH_GENERATION_IDLE_TIMEOUT_S
    # Whole answer (both attempts) when the caller sent no deadline; a shorter deadline wins.
    timeout_s: float = 120.0  # RAGMESH_GENERATION_TIMEOUT_S
    default_max_tokens: int = 512  # RAGMESH_GENERATION_MAX_TOKENS: when the request says 0
    max_tokens_limit: int = 2048  # RAGMESH_GENERATION_MAX_TOKENS_LIMIT: larger requests are cut
    max_question_chars: int = 4000  # RAGMESH_GENERATION_MAX_QUESTION_CHARS: longer is QUERY_TOO_LONG
    max_sources: int = 20  # RAGMESH_GENERATION_MAX_SOURCES: more is INVALID_ARGUMENT
    max_source_chars: int = 6000  # RAGMESH_GENERATION_MAX_SOURCE_CHARS: evidence text per source is cut
    max_history_turns: int = 8  # RAGMESH_GENERATION_MAX_HISTORY_TURNS: older turns are dropped
    max_turn_chars: int = 2000  # RAGMESH_GENERATION_MAX_TURN_CHARS: each turn is cut
    # The model's context in tokens; 0: what the runtime reports on /v1/models, else no token budget.
    max_context_tokens: int = 0  # RAGMESH_GENERATION_MAX_CONTEXT_TOKENS
    # Token estimate for letters, digits and spaces when the runtime has no /tokenize (budget.py).
    chars_per_token: float = 3.0  # RAGMESH_GENERATION_CHARS_PER_TOKEN
    use_tokenizer: bool = True  # RAGMESH_GENERATION_USE_TOKENIZER: ask the runtime's /tokenize when over budget
    # Where the model stops: an echo of the prompt's own tags is never part of an answer.
    stop: tuple[str, ...] = ("<evidence>", "</source>", "<question>", "</question>")  # RAGMESH_GENERATION_STOP
    # Cite an uncited finished answer from the sources that hold its sentences (support.attribute).
    attribution: bool = True  # RAGMESH_GENERATION_ATTRIBUTION

    @classmethod
    def from_env(cls, port: int | None = None) -> GenerationSettings:
        return from_env(
            cls, "RAGMESH_GENERATION_", listen=listen_addr("generation", port),
            names={"llm_url": "RAGMESH_LLM_URL", "llm_model": "RAGMESH_LLM_MODEL", "llm_api_key": "RAGMESH_LLM_API_KEY",
                   "default_max_tokens": "RAGMESH_GENERATION_MAX_TOKENS"},
        )


@lru_cache(maxsize=1)
def get_settings() -> GenerationSettings:
    return GenerationSettings.from_env()
