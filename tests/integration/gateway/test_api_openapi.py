"""The committed docs/openapi.json is what the code generates, and what the gateway serves."""

from __future__ import annotations

import json
from pathlib import Path

from litestar.testing import AsyncTestClient

from ragmesh_gateway.openapi import render

COMMITTED = Path(__file__).resolve().parents[3] / "docs" / "openapi.json"


def test_committed_openapi_matches_the_code() -> None:
    assert (
        COMMITTED.read_text(encoding="utf-8") == render()
    ), "docs/openapi.json is stale: run `.venv/bin/python -m ragmesh_gateway.openapi > docs/openapi.json`"


async def test_served_openapi_is_the_committed_one(client: AsyncTestClient) -> None:
    response = await client.get("/schema/openapi.json")
    assert response.status_code == 200
    assert response.json() == json.loads(COMMITTED.read_text(encoding="utf-8"))


def test_openapi_covers_every_public_route_and_error_shape() -> None:
    document = json.loads(COMMITTED.read_text(encoding="utf-8"))
    assert {
        "/api/rag/v1/search",
        "/api/rag/v1/chunks/batch-get",
        "/api/rag/v1/chat/stream",
        "/api/rag/v1/chat",
        "/api/rag/v1/corpora",
        "/api/rag/v1/stats",
        "/api/rag/v1/files/{corpus}/{path}",
        "/api/rag/v1/internal/index/build",
        "/api/rag/v1/internal/index/promote",
        "/api/rag/v1/internal/index/status",
        "/api/rag/v1/internal/index/remove",
        "/health/live",
        "/health/ready",
    } <= set(document["paths"])
    search = document["paths"]["/api/rag/v1/search"]["post"]
    assert search["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/SearchRequest")
    assert search["responses"]["400"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    assert set(document["components"]["schemas"]["ErrorBody"]["properties"]) == {
        "code",
        "message",
        "request_id",
        "details",
    }
