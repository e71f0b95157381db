"""Operational endpoints: liveness, readiness, Prometheus metrics."""

from __future__ import annotations

from litestar import Controller, MediaType, Response, get
from litestar.openapi import ResponseSpec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from ragmesh_gateway.health import metrics as health_metrics
from ragmesh_gateway.health.schemas import LiveResponse, ReadyResponse
from ragmesh_gateway.health.service import ReadinessService


class HealthController(Controller):
    tags = ["operations"]

    @get("/health/live", summary="The process is up (no downstream checks)")
    async def live(self) -> LiveResponse:
        return LiveResponse()

    @get(
        "/health/ready",
        summary="Downstreams serving, at least one active corpus, and the model runtimes behind them",
        description="200 `ready` or `degraded` (a model runtime is down: answers are flagged); "
        "503 `not_ready` with the same body shape.",
        responses={
            503: ResponseSpec(data_container=ReadyResponse, description="Not ready", generate_examples=False)
        },
    )
    async def ready(self, readiness: ReadinessService) -> Response[ReadyResponse]:
        result = await readiness.check()
        health_metrics.publish(result)
        # The response's fields by name from the readiness result; no reason is null, not "".
        shown = {name: getattr(result, name) for name in ReadyResponse.__struct_fields__ if name != "reason"}
        body = ReadyResponse(**shown, reason=result.reason or None)
        return Response(body, status_code=200 if result.ready else 503)

    @get("/metrics", summary="Prometheus metrics", media_type=MediaType.TEXT, include_in_schema=False)
    async def metrics(self, readiness: ReadinessService) -> Response[bytes]:
        health_metrics.publish(await readiness.check())
        return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
