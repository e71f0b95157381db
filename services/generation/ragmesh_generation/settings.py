"""Generation service settings, each field read from its RAGMESH_* variable."""

from __future__ import annotations

from functools import lru_cache

import msgspec

from ragmesh_common.settings import METRICS_PORTS, addr, env_bool, env_float, env_int, env_list, env_str


class GenerationSettings(msgspec.Struct, frozen=True):
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
        d = cls()
        listen = addr("generation")
        if port is not None:
            listen = f"{listen.rsplit(':', 1)[0]}:{port}"
        return cls(
            listen=listen,
            metrics_port=env_int("RAGMESH_GENERATION_METRICS_PORT", d.metrics_port),
            llm_url=env_str("RAGMESH_LLM_URL", d.llm_url),
            llm_model=env_str("RAGMESH_LLM_MODEL", d.llm_model),
            llm_api_key=env_str("RAGMESH_LLM_API_KEY", d.llm_api_key),
            first_token_timeout_s=env_float("RAGMESH_GENERATION_FIRST_TOKEN_TIMEOUT_S", d.first_token_timeout_s),
            idle_timeout_s=env_float("RAGMESH_GENERATION_IDLE_TIMEOUT_S", d.idle_timeout_s),
            timeout_s=env_float("RAGMESH_GENERATION_TIMEOUT_S", d.timeout_s),
            default_max_tokens=env_int("RAGMESH_GENERATION_MAX_TOKENS", d.default_max_tokens),
            max_tokens_limit=env_int("RAGMESH_GENERATION_MAX_TOKENS_LIMIT", d.max_tokens_limit),
            max_question_chars=env_int("RAGMESH_GENERATION_MAX_QUESTION_CHARS", d.max_question_chars),
            max_sources=env_int("RAGMESH_GENERATION_MAX_SOURCES", d.max_sources),
            max_source_chars=env_int("RAGMESH_GENERATION_MAX_SOURCE_CHARS", d.max_source_chars),
            max_history_turns=env_int("RAGMESH_GENERATION_MAX_HISTORY_TURNS", d.max_history_turns),
            max_turn_chars=env_int("RAGMESH_GENERATION_MAX_TURN_CHARS", d.max_turn_chars),
            max_context_tokens=env_int("RAGMESH_GENERATION_MAX_CONTEXT_TOKENS", d.max_context_tokens),
            chars_per_token=env_float("RAGMESH_GENERATION_CHARS_PER_TOKEN", d.chars_per_token),
            use_tokenizer=env_bool("RAGMESH_GENERATION_USE_TOKENIZER", d.use_tokenizer),
            stop=tuple(env_list("RAGMESH_GENERATION_STOP", list(d.stop))),
            attribution=env_bool("RAGMESH_GENERATION_ATTRIBUTION", d.attribution),
        )

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0]

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


@lru_cache(maxsize=1)
def get_settings() -> GenerationSettings:
    return GenerationSettings.from_env()
