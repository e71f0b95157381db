"""Gateway settings: one typed struct, each field naming the variable it reads, one cached getter."""

from __future__ import annotations

import functools

import msgspec

from ragmesh_common.answer_defaults import ANSWER_SOURCES
from ragmesh_common.settings import DEFAULT_PORTS, addr, env_bool, env_float, env_int, env_list, env_str

# The MCP transport refuses other Host headers (DNS-rebinding protection); a deployment behind a
# real host name adds it here, e.g. "rag.example.com,rag.example.com:*".
DEFAULT_ALLOWED_HOSTS = ["127.0.0.1:*", "localhost:*"]


class GatewaySettings(msgspec.Struct, frozen=True, kw_only=True):
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORTS["gateway"]
    retrieval_addr: str = f"127.0.0.1:{DEFAULT_PORTS['retrieval']}"
    rerank_addr: str = f"127.0.0.1:{DEFAULT_PORTS['rerank']}"
    generation_addr: str = f"127.0.0.1:{DEFAULT_PORTS['generation']}"
    indexer_addr: str = f"127.0.0.1:{DEFAULT_PORTS['indexer']}"
    allowed_hosts: list[str] = msgspec.field(default_factory=lambda: list(DEFAULT_ALLOWED_HOSTS))
    max_body_bytes: int = 64 * 1024
    # Candidates asked from retrieval before reranking cuts them to top_k.
    search_candidates: int = 50
    search_timeout_s: float = 10.0
    rerank_timeout_s: float = 5.0
    generation_timeout_s: float = 300.0
    admin_timeout_s: float = 30.0
    build_timeout_s: float = 3600.0
    health_timeout_s: float = 2.0
    # SSE comment sent while waiting on the generator, so proxies keep the stream open.
    heartbeat_s: float = 10.0
    chat_top_k: int = ANSWER_SOURCES
    chat_max_tokens: int = 512
    chat_include_content: bool = True
    # Follow-up questions: "rules" (deterministic, ragmesh_gateway.sessions.condense), "llm" (the
    # OpenAI-compatible model at llm_url, rules as fallback) or "off" (searched as asked).
    chat_condenser: str = "rules"
    condenser_timeout_s: float = 5.0
    # Session memory (in redis_url; without it no session ids are issued): sliding TTL, caps.
    session_ttl_s: float = 1800.0
    session_max_turns: int = 20
    session_max_bytes: int = 32 * 1024
    session_prefix: str = "ragmesh:session"
    llm_model: str = ""
    llm_url: str = ""
    llm_api_key: str = ""
    # Corpus ids the gateway serves (retrieval only lists corpora it is asked about by name).
    corpora: list[str] = msgspec.field(default_factory=list)
    # corpus id -> folder holding its original files (served by GET /files/{corpus}/{path}).
    corpus_roots: dict[str, str] = msgspec.field(default_factory=dict)
    mcp_stateless: bool = True
    # Largest file an MCP resource read returns whole (a line window of a bigger text file still works).
    mcp_resource_max_bytes: int = 1024 * 1024
    # OAuth 2.0 authorization servers whose tokens this gateway accepts (RFC 9728 metadata is served
    # only when set) and the public base URL clients reach it at (default: from the Host header).
    authorization_servers: list[str] = msgspec.field(default_factory=list)
    public_url: str = ""
    # "disabled" (embedded default: one local operator) or "tokens" (API tokens + corpus grants).
    auth_mode: str = "disabled"
    allow_anonymous: bool = True
    postgres_url: str = ""
    # PostgreSQL schema of tokens, grants and feedback (one per deployment; tests use their own).
    db_schema: str = "gateway"
    redis_url: str = ""
    # "search=5/20,chat=0.5/5,*=20/40" (route_class=tokens_per_s/burst); empty: no rate limits.
    rate_limits: str = ""
    rate_limit_fail_open: bool = True
    # Redis key prefix of the buckets; replicas of one deployment share buckets by sharing it.
    rate_limit_prefix: str = "ragmesh:rl"
    trusted_proxies: list[str] = msgspec.field(default_factory=list)
    # Origins a browser may call the API from (CORS); empty: none, the widget is same-origin.
    cors_origins: list[str] = msgspec.field(default_factory=list)

    @property
    def served_corpora(self) -> frozenset[str]:
        return frozenset(self.corpora) | frozenset(self.corpus_roots)

    @classmethod
    def from_env(cls) -> GatewaySettings:
        return cls(
            host=env_str("RAGMESH_GATEWAY_HOST", "127.0.0.1"),
            port=env_int("RAGMESH_GATEWAY_PORT", DEFAULT_PORTS["gateway"]),
            retrieval_addr=addr("retrieval"),
            rerank_addr=addr("rerank"),
            generation_addr=addr("generation"),
            indexer_addr=addr("indexer"),
            allowed_hosts=env_list("RAGMESH_ALLOWED_HOSTS", DEFAULT_ALLOWED_HOSTS),
            max_body_bytes=env_int("RAGMESH_MAX_BODY_BYTES", 64 * 1024),
            search_candidates=env_int("RAGMESH_SEARCH_CANDIDATES", 50),
            search_timeout_s=env_float("RAGMESH_SEARCH_TIMEOUT_S", 10.0),
            rerank_timeout_s=env_float("RAGMESH_RERANK_TIMEOUT_S", 5.0),
            generation_timeout_s=env_float("RAGMESH_GENERATION_TIMEOUT_S", 300.0),
            admin_timeout_s=env_float("RAGMESH_ADMIN_TIMEOUT_S", 30.0),
            build_timeout_s=env_float("RAGMESH_BUILD_TIMEOUT_S", 3600.0),
            health_timeout_s=env_float("RAGMESH_HEALTH_TIMEOUT_S", 2.0),
            heartbeat_s=env_float("RAGMESH_SSE_HEARTBEAT_S", 10.0),
            chat_top_k=env_int("RAGMESH_CHAT_TOP_K", ANSWER_SOURCES),
            chat_max_tokens=env_int("RAGMESH_CHAT_MAX_TOKENS", 512),
            chat_include_content=env_bool("RAGMESH_CHAT_INCLUDE_CONTENT", True),
            chat_condenser=_choice("RAGMESH_CHAT_CONDENSER", env_str("RAGMESH_CHAT_CONDENSER", "rules"),
                                   ("rules", "llm", "off")),
            condenser_timeout_s=env_float("RAGMESH_CHAT_CONDENSER_TIMEOUT_S", 5.0),
            session_ttl_s=env_float("RAGMESH_SESSION_TTL_S", 1800.0),
            session_max_turns=env_int("RAGMESH_SESSION_MAX_TURNS", 20),
            session_max_bytes=env_int("RAGMESH_SESSION_MAX_BYTES", 32 * 1024),
            session_prefix=env_str("RAGMESH_SESSION_PREFIX", "ragmesh:session"),
            llm_model=env_str("RAGMESH_LLM_MODEL", ""),
            llm_url=env_str("RAGMESH_LLM_URL", ""),
            llm_api_key=env_str("RAGMESH_LLM_API_KEY", ""),
            corpora=env_list("RAGMESH_CORPORA"),
            corpus_roots=parse_corpus_roots(env_list("RAGMESH_CORPUS_ROOTS")),
            mcp_stateless=env_bool("RAGMESH_MCP_STATELESS", True),
            mcp_resource_max_bytes=env_int("RAGMESH_MCP_RESOURCE_MAX_BYTES", 1024 * 1024),
            authorization_servers=env_list("RAGMESH_AUTHORIZATION_SERVERS"),
            public_url=env_str("RAGMESH_PUBLIC_URL", "").rstrip("/"),
            auth_mode=_auth_mode(env_str("RAGMESH_AUTH_MODE", "disabled")),
            allow_anonymous=env_bool("RAGMESH_ALLOW_ANONYMOUS", True),
            postgres_url=env_str("RAGMESH_POSTGRES_URL", ""),
            db_schema=env_str("RAGMESH_GATEWAY_DB_SCHEMA", "gateway"),
            redis_url=env_str("RAGMESH_REDIS_URL", ""),
            rate_limits=env_str("RAGMESH_RATE_LIMITS", ""),
            rate_limit_fail_open=env_bool("RAGMESH_RATE_LIMIT_FAIL_OPEN", True),
            rate_limit_prefix=env_str("RAGMESH_RATE_LIMIT_PREFIX", "ragmesh:rl"),
            trusted_proxies=env_list("RAGMESH_TRUSTED_PROXIES"),
            cors_origins=env_list("RAGMESH_CORS_ORIGINS"),
        )


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise SystemExit(f"ragmesh: {name}={value!r} must be one of {', '.join(allowed)}")
    return value


def _auth_mode(value: str) -> str:
    if value not in ("disabled", "tokens"):
        raise SystemExit(f"ragmesh: RAGMESH_AUTH_MODE={value!r} must be 'disabled' or 'tokens'")
    return value


def parse_corpus_roots(items: list[str]) -> dict[str, str]:
    """``["docs=/srv/docs", "api@2=/srv/api"]`` -> ``{"docs": "/srv/docs", "api@2": "/srv/api"}``.

    A bare ``/folder`` entry only widens what the indexer may read (its allow-list, the same
    variable); it names no corpus, so the gateway serves nothing from it by itself."""
    roots: dict[str, str] = {}
    for item in items:
        if "=" not in item and item.strip().startswith("/"):
            continue
        corpus, sep, folder = item.partition("=")
        if not sep or not corpus.strip() or not folder.strip():
            raise SystemExit(f"ragmesh: RAGMESH_CORPUS_ROOTS entry {item!r} is not corpus=/path")
        roots[corpus.strip()] = folder.strip()
    return roots


@functools.cache
def get_settings() -> GatewaySettings:
    return GatewaySettings.from_env()
