"""Composition root of the model runtime: settings in, a ready Litestar app out.

Models load here, once and before the app exists, so a process that accepts connections can
already answer; a model file failing its sha256 check stops it here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from litestar import Litestar
from litestar.datastructures import State
from litestar.plugins.opentelemetry import OpenTelemetryConfig, OpenTelemetryPlugin

from ragmesh_common.telemetry import ASGI_MESSAGE_SPANS, bind_request_id, http_server_span_details
from ragmesh_runtime.chat import ChatGenerator, build_chat_generator
from ragmesh_runtime.http.errors import handle_exception
from ragmesh_runtime.http.metrics import RuntimeMetrics, metrics_endpoint
from ragmesh_runtime.http.openai_routes import OpenAiController
from ragmesh_runtime.http.tei_routes import TeiController
from ragmesh_runtime.models import LoadedModels, load_models
from ragmesh_runtime.service import RuntimeService
from ragmesh_runtime.settings import RuntimeSettings, load_settings

log = logging.getLogger("ragmesh_runtime")


def create_app(
    settings: RuntimeSettings | None = None,
    models: LoadedModels | None = None,
    generator: ChatGenerator | None = None,
) -> Litestar:
    """Build the app; pass ``models`` (and a ``generator``, which the caller then closes) to share
    what is already loaded (tests, benchmarks)."""
    settings = settings or load_settings()
    models = models or load_models(settings)
    metrics = RuntimeMetrics()
    service = RuntimeService(models, settings, observe_batch=metrics.observe_batch)
    owned = []  # what this app closes at shutdown besides the service
    if generator is None:
        generator = build_chat_generator(settings, service)
        owned.append(generator.close)
    log.info(
        "runtime ready: rerank=%s generator=%s models loaded in %.2fs",
        service.scorer.name,
        generator.model_id,
        models.load_seconds,
    )
    @contextlib.asynccontextmanager
    async def save_caches_while_serving(_: Litestar) -> AsyncIterator[None]:
        saver = asyncio.create_task(service.keep_caches_saved())
        try:
            yield
        finally:
            saver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await saver

    app = Litestar(
        route_handlers=[TeiController, OpenAiController, metrics_endpoint],
        exception_handlers={Exception: handle_exception},
        state=State({"runtime_service": service, "runtime_metrics": metrics, "chat_generator": generator}),
        request_max_body_size=settings.server.max_body_bytes,
        lifespan=[save_caches_while_serving],
        on_shutdown=[*owned, service.close],
        openapi_config=None,
        # Spans continue the caller's W3C traceparent, so a query's trace reaches the models.
        plugins=[OpenTelemetryPlugin(OpenTelemetryConfig(
            exclude=["/health", "/metrics"], scope_span_details_extractor=http_server_span_details,
            exclude_spans=ASGI_MESSAGE_SPANS,
        ))],
        logging_config=None,  # the process's logging is set up once, by ragmesh_common.telemetry
        debug=False,
    )
    # Outermost, so that routing failures (404/405) are counted too; the caller's request id is
    # bound for everything inside, so the log lines of a request carry it with its trace id.
    app.asgi_handler = metrics.middleware(bind_request_id(app.asgi_handler))
    return app
