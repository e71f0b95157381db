"""POST /api/rag/v1/feedback against the real PostgreSQL (and Redis for its rate limit)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from litestar.testing import AsyncTestClient

from gateway_mesh import Mesh
from ragmesh_gateway.app import create_app

FEEDBACK = "/api/rag/v1/feedback"


@pytest.fixture
def schema(unique_schema) -> str:
    return unique_schema("fb")


async def rows(pg_url: str, schema: str) -> list[asyncpg.Record]:
    """Stored feedback; none when the table was never created (storage opens on first use)."""
    conn = await asyncpg.connect(pg_url)
    try:
        if await conn.fetchval("SELECT to_regclass($1)", f"{schema}.feedback") is None:
            return []
        return await conn.fetch(f"SELECT request_id, rating, comment, client_id FROM {schema}.feedback "
                                "ORDER BY feedback_id")
    finally:
        await conn.close()


def counter(metrics_text: str, rating: str) -> float:
    for line in metrics_text.splitlines():
        if line.startswith(f'ragmesh_feedback_total{{rating="{rating}"}}'):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


@pytest.fixture
async def client(mesh: Mesh, pg_url: str, schema: str) -> AsyncIterator[AsyncTestClient]:
    settings = mesh.settings(postgres_url=pg_url, db_schema=schema)
    async with AsyncTestClient(create_app(settings)) as test_client:
        yield test_client


async def test_feedback_is_stored_and_counted(client: AsyncTestClient, pg_url: str, schema: str) -> None:
    before = counter((await client.get("/metrics")).text, "up")
    body = {"request_id": "answer-1", "rating": 1, "comment": " clear! "}
    response = await client.post(FEEDBACK, json=body, headers={"X-Request-ID": "fb-call-1"})
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["request_id"] == "fb-call-1" and body["rated_request_id"] == "answer-1"
    assert isinstance(body["feedback_id"], int)
    await client.post(FEEDBACK, json={"request_id": "answer-2", "rating": -1})
    stored = [tuple(r) for r in await rows(pg_url, schema)]
    assert stored == [("answer-1", 1, "clear!", "local"), ("answer-2", -1, None, "local")]
    assert counter((await client.get("/metrics")).text, "up") == before + 1


@pytest.mark.parametrize("body, code", [
    ({"request_id": "a", "rating": 0}, "INVALID_ARGUMENT"),
    ({"request_id": "a", "rating": 5}, "INVALID_ARGUMENT"),
    ({"request_id": "a", "rating": True}, "MALFORMED_BODY"),
    ({"request_id": "", "rating": 1}, "INVALID_ARGUMENT"),
    ({"request_id": "a" * 129, "rating": 1}, "INVALID_ARGUMENT"),
    ({"request_id": "a\u0000b", "rating": 1}, "INVALID_CHARACTER"),
    ({"request_id": "a", "rating": 1, "comment": "c" * 2001}, "INVALID_ARGUMENT"),
    ({"rating": 1}, "MALFORMED_BODY"),
    ({"request_id": "a", "rating": 1, "stars": 5}, "UNKNOWN_FIELD"),
])
async def test_bad_feedback_is_refused_and_not_stored(client, pg_url: str, schema: str, body, code) -> None:
    response = await client.post(FEEDBACK, json=body)
    assert (response.status_code, response.json()["code"]) == (400, code)
    assert await rows(pg_url, schema) == []


async def test_without_postgres_feedback_is_unavailable_and_the_gateway_still_serves(mesh: Mesh) -> None:
    async with AsyncTestClient(create_app(mesh.settings())) as client:
        response = await client.post(FEEDBACK, json={"request_id": "a", "rating": 1})
        assert response.status_code == 503 and response.json()["code"] == "UNAVAILABLE"
        assert (await client.get("/health/live")).status_code == 200


async def test_anonymous_site_traffic_may_rate_under_its_own_limit(
    mesh: Mesh, pg_url: str, schema: str, redis_url: str
) -> None:
    settings = mesh.settings(
        auth_mode="tokens", allow_anonymous=True, postgres_url=pg_url, db_schema=schema, redis_url=redis_url,
        rate_limits="feedback=0.001/2", rate_limit_prefix=f"ragmesh-test:{uuid.uuid4().hex[:12]}:rl",
    )
    async with AsyncTestClient(create_app(settings)) as client:
        statuses = [(await client.post(FEEDBACK, json={"request_id": f"r{i}", "rating": 1})).status_code
                    for i in range(3)]
        assert statuses == [201, 201, 429]
        # The feedback bucket is its own: chat is not limited by it.
        chat = await client.post("/api/rag/v1/chat", json={"question": "q"})
        assert chat.status_code == 200, chat.text
    stored = await rows(pg_url, schema)
    assert [(r["request_id"], r["client_id"]) for r in stored] == [("r0", None), ("r1", None)]
