"""The composition root: the only module that knows every feature.

``GatewayDeps`` holds the ports the gateway runs on; ``build_deps`` picks the real adapters from
settings (gRPC clients in ``clients/``, PostgreSQL and Redis stores); tests hand ``create_app``
their own GatewayDeps with in-process fakes for any port. ``GatewayServices`` builds the application
services on those ports and hands them out: to controllers as Litestar dependencies (by parameter
name), to the edge checks as an :class:`EdgeGate` in the app state, to the MCP edge as a whole.
``route_handlers`` lists every route and ``PROTOCOL_ERROR_BODIES``/``REFUSAL_BODIES`` the error
bodies of the protocol edges, so that ``app`` assembles the app without naming a feature.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from litestar.datastructures import State
from litestar.di import Provide
from litestar.handlers import BaseRouteHandler
from litestar.openapi.plugins import OpenAPIRenderPlugin
from litestar.openapi.spec import OpenAPI

from ragmesh_common import metrics
from ragmesh_common.settings import MissingSetting

from ragmesh_gateway.access.ports import AuthDisabled, Authenticator, NoRateLimit, RateLimiter
from ragmesh_gateway.catalog import CorpusCatalog, CorpusDirectory, DiscoveredCorpusDirectory
from ragmesh_gateway.chat.controllers import ChatController
from ragmesh_gateway.chat.ports import AnswerGenerator
from ragmesh_gateway.chat.service import ChatService
from ragmesh_gateway.chat.widget_files import widget_router
from ragmesh_gateway.corpora.controllers import CorporaController
from ragmesh_gateway.corpora.service import CorpusService
from ragmesh_gateway.feedback.controllers import FeedbackController
from ragmesh_gateway.feedback.ports import FeedbackSink, NoFeedbackStorage
from ragmesh_gateway.feedback.service import FeedbackService
from ragmesh_gateway.files.controllers import FilesController
from ragmesh_gateway.files.ports import (
    ConfiguredCorpusRoots,
    CorpusRoots,
    IndexedCorpusRoots,
    IndexedSources,
    NothingIndexed,
)
from ragmesh_gateway.files.service import FileService
from ragmesh_gateway.files.view_controller import SourceViewController
from ragmesh_gateway.health.controllers import HealthController
from ragmesh_gateway.health.ports import DependencyProbe, ModelDependency
from ragmesh_gateway.health.service import ReadinessService
from ragmesh_gateway.home.api_reference import favicon, render_plugins, swagger_ui_file
from ragmesh_gateway.home.controllers import root
from ragmesh_gateway.index_admin.controllers import IndexAdminController
from ragmesh_gateway.index_admin.ports import IndexAdmin
from ragmesh_gateway.index_admin.service import IndexAdminService
from ragmesh_gateway.mcp.jsonrpc import refusal_body
from ragmesh_gateway.mcp.mount import McpMount
from ragmesh_gateway.mcp.protected_resource import ProtectedResourceController
from ragmesh_gateway.mcp.server import build_mcp_server
from ragmesh_gateway.openai_chat.contract import declare_refusals
from ragmesh_gateway.openai_chat.controllers import API_PREFIX as OPENAI_PREFIX
from ragmesh_gateway.openai_chat.controllers import OpenAiController
from ragmesh_gateway.openai_chat.presenters import error_body as openai_error_body
from ragmesh_gateway.openai_chat.service import OpenAiChatService
from ragmesh_gateway.search.controllers import SearchController
from ragmesh_gateway.search.ports import Reranker, SearchBackend
from ragmesh_gateway.search.service import SearchService, TextGuard
from ragmesh_gateway.security.injection_guard import InjectionGuard
from ragmesh_gateway.security.metrics import count_injection_findings
from ragmesh_gateway.sessions.condense import RuleCondenser
from ragmesh_gateway.sessions.ports import (
    NoSessionMemory,
    QuestionCondenser,
    SessionMemory,
    StandaloneQuestions,
)
from ragmesh_gateway.settings import GatewaySettings
from ragmesh_gateway.web.allowed_hosts import RefusalBody
from ragmesh_gateway.web.dependencies import EDGE_GATE, EdgeGate
from ragmesh_gateway.web.errors import BodyShape
from ragmesh_gateway.web.openapi_contract import complete_document

# Registered at import so that their zero series are exported from the first scrape.
import ragmesh_gateway.access.metrics  # noqa: E402,F401
import ragmesh_gateway.feedback.metrics  # noqa: E402,F401


@dataclass
class GatewayDeps:
    search_backend: SearchBackend
    reranker: Reranker
    generator: AnswerGenerator
    catalog: CorpusCatalog
    index_admin: IndexAdmin
    probes: list[DependencyProbe]
    corpus_roots: CorpusRoots
    directory: CorpusDirectory
    # The model runtime behind each service, as that service reports it (readiness only).
    models: list[ModelDependency] = field(default_factory=list)
    guard: TextGuard = field(default_factory=lambda: InjectionGuard(on_findings=count_injection_findings))
    # Which files /files may serve (those of the active index); default deny.
    indexed_sources: IndexedSources = field(default_factory=NothingIndexed)
    session_memory: SessionMemory = field(default_factory=NoSessionMemory)
    condenser: QuestionCondenser = field(default_factory=RuleCondenser)
    feedback_sink: FeedbackSink = field(default_factory=NoFeedbackStorage)
    # None: authentication disabled (every served corpus, every scope).
    authenticator: Authenticator | None = None
    rate_limiter: RateLimiter = field(default_factory=NoRateLimit)
    # Run in the app's lifespan: start hooks need the server's event loop (database pools).
    on_start: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    on_close: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def start(self) -> None:
        for hook in self.on_start:
            await hook()

    async def close(self) -> None:
        for hook in reversed(self.on_close):
            await hook()


def build_deps(settings: GatewaySettings) -> GatewayDeps:
    """Real adapters: gRPC to the downstream services, roots from config."""
    from ragmesh_gateway.clients.channels import Channels
    from ragmesh_gateway.clients.generation import GrpcAnswerGenerator
    from ragmesh_gateway.clients.health import GrpcHealthProbe, GrpcModelProbe
    from ragmesh_gateway.clients.indexer import GrpcIndexAdmin
    from ragmesh_gateway.clients.rerank import GrpcReranker
    from ragmesh_gateway.clients.retrieval import GrpcRetrieval

    channels = Channels(
        {
            "retrieval": settings.retrieval_addr,
            "rerank": settings.rerank_addr,
            "generation": settings.generation_addr,
            "indexer": settings.indexer_addr,
        }
    )
    retrieval = GrpcRetrieval(channels, timeout_s=settings.search_timeout_s)
    deps = GatewayDeps(
        search_backend=retrieval,
        reranker=GrpcReranker(channels, timeout_s=settings.rerank_timeout_s),
        generator=GrpcAnswerGenerator(channels, timeout_s=settings.generation_timeout_s),
        catalog=retrieval,
        index_admin=GrpcIndexAdmin(
            channels, timeout_s=settings.admin_timeout_s, build_timeout_s=settings.build_timeout_s
        ),
        probes=[
            GrpcHealthProbe(channels, peer, timeout_s=settings.health_timeout_s)
            for peer in ("retrieval", "rerank", "generation")
        ],
        models=[
            GrpcModelProbe(channels, peer, name, timeout_s=settings.health_timeout_s)
            for peer, name in (("retrieval", "embedding"), ("rerank", "rerank"), ("generation", "generation"))
        ],
        corpus_roots=ConfiguredCorpusRoots(settings.corpus_roots),
        directory=DiscoveredCorpusDirectory(retrieval, settings.served_corpora),
        indexed_sources=retrieval,
        on_close=[channels.close],
    )
    deps.corpus_roots = IndexedCorpusRoots(ConfiguredCorpusRoots(settings.corpus_roots), deps.directory)
    _add_access_control(settings, deps)
    _add_conversations(settings, deps)
    _add_feedback(settings, deps)
    return deps


def _add_conversations(settings: GatewaySettings, deps: GatewayDeps) -> None:
    """Session memory in Redis when RAGMESH_REDIS_URL is set (``ragmesh up`` always sets it)."""
    if settings.redis_url:
        from ragmesh_common.redis_client import connect

        from ragmesh_gateway.sessions.redis_memory import RedisSessionMemory

        redis = connect(settings.redis_url)
        deps.session_memory = RedisSessionMemory(
            redis,
            ttl_s=settings.session_ttl_s,
            max_turns=settings.session_max_turns,
            max_bytes=settings.session_max_bytes,
            key_prefix=settings.session_prefix,
        )
        deps.on_close.append(redis.aclose)
    if settings.chat_condenser == "off":
        deps.condenser = StandaloneQuestions()
    elif settings.chat_condenser == "llm":
        from ragmesh_common.clients.llm import ChatClient

        from ragmesh_gateway.sessions.llm_condenser import LlmCondenser

        if not settings.llm_url:
            raise MissingSetting("RAGMESH_LLM_URL", "RAGMESH_CHAT_CONDENSER=llm asks that model")
        client = ChatClient(settings.llm_url, settings.llm_model, api_key=settings.llm_api_key,
                            timeout=settings.condenser_timeout_s)
        deps.condenser = LlmCondenser(client, timeout_s=settings.condenser_timeout_s,
                                      on_fallback=lambda: count_degraded("condenser"))
        deps.on_close.append(client.close)


def _add_feedback(settings: GatewaySettings, deps: GatewayDeps) -> None:
    if settings.postgres_url:
        from ragmesh_gateway.feedback.store import PostgresFeedback

        sink = PostgresFeedback(settings.postgres_url, schema=settings.db_schema)
        deps.feedback_sink = sink
        deps.on_close.append(sink.close)  # opened on first use: PostgreSQL down must not stop the gateway


def _add_access_control(settings: GatewaySettings, deps: GatewayDeps) -> None:
    """Token auth and rate limits when configured; the embedded default keeps both off."""
    if settings.auth_mode == "tokens":
        from ragmesh_gateway.access.adapters import SecurityStores, TokenAuthenticator

        if not settings.postgres_url:
            raise MissingSetting(
                "RAGMESH_POSTGRES_URL", "RAGMESH_AUTH_MODE=tokens keeps tokens in PostgreSQL"
            )
        stores = SecurityStores(settings.postgres_url, schema=settings.db_schema)
        deps.authenticator = TokenAuthenticator(
            stores,
            deps.catalog,
            deps.directory,
            allow_anonymous=settings.allow_anonymous,
            trusted_proxies=settings.trusted_proxies,
        )
        deps.on_start.append(stores.start)
        deps.on_close.append(stores.close)
    if settings.rate_limits:
        from ragmesh_common.redis_client import connect

        from ragmesh_gateway.access.adapters import RedisRateLimit
        from ragmesh_gateway.access.ratelimit import RateLimiter as RedisBuckets
        from ragmesh_gateway.access.ratelimit import parse_limits

        if not settings.redis_url:
            raise MissingSetting("RAGMESH_REDIS_URL", "RAGMESH_RATE_LIMITS keeps buckets in Redis")
        try:
            limits = parse_limits(settings.rate_limits)
        except ValueError as exc:
            raise SystemExit(f"ragmesh: RAGMESH_RATE_LIMITS: {exc}") from exc
        redis = connect(settings.redis_url)
        buckets = RedisBuckets(
            redis, limits, key_prefix=settings.rate_limit_prefix, fail_open=settings.rate_limit_fail_open
        )
        deps.rate_limiter = RedisRateLimit(buckets, limits, trusted_proxies=settings.trusted_proxies)
        deps.on_close.append(redis.aclose)


def count_degraded(component: str) -> None:
    metrics.DEGRADED.labels("gateway", component).inc()


@dataclass
class GatewayServices:
    settings: GatewaySettings
    search: SearchService
    chat: ChatService
    corpora: CorpusService
    files: FileService
    index_admin: IndexAdminService
    readiness: ReadinessService
    authenticator: Authenticator
    rate_limiter: RateLimiter
    feedback: FeedbackService
    openai_chat: OpenAiChatService

    @classmethod
    def build(cls, settings: GatewaySettings, deps: GatewayDeps) -> GatewayServices:
        search = SearchService(
            deps.search_backend,
            deps.reranker,
            deps.guard,
            candidates=settings.search_candidates,
            on_degraded=count_degraded,
        )
        chat = ChatService(
            search,
            deps.generator,
            deps.session_memory,
            condenser=deps.condenser,
            default_top_k=settings.chat_top_k,
            max_tokens=settings.chat_max_tokens,
            include_content=settings.chat_include_content,
            model_hint=settings.llm_model,
            on_degraded=count_degraded,
        )
        return cls(
            settings=settings,
            search=search,
            chat=chat,
            corpora=CorpusService(deps.catalog),
            files=FileService(deps.corpus_roots, deps.indexed_sources),
            index_admin=IndexAdminService(deps.index_admin),
            readiness=ReadinessService(
                deps.probes, deps.catalog, deps.directory, models=deps.models, timeout_s=settings.health_timeout_s
            ),
            authenticator=deps.authenticator or AuthDisabled(deps.directory),
            rate_limiter=deps.rate_limiter,
            feedback=FeedbackService(deps.feedback_sink),
            openai_chat=OpenAiChatService(chat, max_history_turns=settings.session_max_turns),
        )


    def dependencies(self) -> dict[str, Provide]:
        """What a controller may ask for by parameter name: a feature's service, or the settings."""
        provided = {
            "search": self.search,
            "chat": self.chat,
            "corpora": self.corpora,
            "files": self.files,
            "admin": self.index_admin,
            "readiness": self.readiness,
            "feedback": self.feedback,
            "openai_chat": self.openai_chat,
            "settings": self.settings,
        }
        return {name: Provide(_constant(value), use_cache=True, sync_to_thread=False)
                for name, value in provided.items()}

    def state(self) -> State:
        return State({EDGE_GATE: EdgeGate(self.authenticator, self.rate_limiter)})


def _constant(value: Any) -> Callable[[], Any]:
    def provide() -> Any:
        return value

    return provide


def route_handlers(services: GatewayServices, mcp: McpMount) -> list[BaseRouteHandler | type]:
    return [
        SearchController,
        ChatController,
        OpenAiController,
        FeedbackController,
        widget_router(),
        CorporaController,
        FilesController,
        SourceViewController,
        IndexAdminController,
        HealthController,
        ProtectedResourceController,
        root,
        favicon,
        swagger_ui_file,
        mcp.route_handler(),
    ]


def api_reference_plugins() -> list[OpenAPIRenderPlugin]:
    """The pages under /schema: Swagger UI from the gateway's own files, the document as JSON and YAML."""
    return render_plugins()


def mcp_mount(settings: GatewaySettings, services: GatewayServices) -> McpMount:
    return McpMount(build_mcp_server(services), settings, services)


# Routes under a prefix whose errors answer in that protocol's shape (OpenAI's error object).
PROTOCOL_ERROR_BODIES: dict[str, BodyShape] = {f"{OPENAI_PREFIX}/": openai_error_body}
# Refused host names under /mcp answer a JSON-RPC error beside the REST fields.
REFUSAL_BODIES: Mapping[str, RefusalBody] = {"/mcp": refusal_body}


def complete_openapi(document: OpenAPI) -> None:
    """What the generated document lacks: the request contract's errors, the OpenAI route's refusals."""
    complete_document(document)
    declare_refusals(document)
