"""Every route class with its stores stopped (issue 12, Build 3): PostgreSQL (tokens, grants,
feedback) and Redis (rate limits, sessions) of a token-auth gateway, as Compose runs it.

- Redis down: rate limiting fails open, and says so: no RateLimit-* headers claiming a budget
  nobody counted, ``Ragmesh-Degraded: ratelimit`` instead (it used to send a full budget).
- PostgreSQL down: nothing can be authenticated, so every authenticated route answers 503
  UNAVAILABLE with Retry-After and a code; none answers 500. Liveness stays 200.
- Both back (restarted on the same ports): the very first request of each class is served.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from gateway_mesh import Mesh, running_mesh
from loopback_server import serve_in_thread
from ragmesh_gateway.app import create_app

API = "/api/rag/v1"
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
MCP_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}

# (route class, method, path, JSON body); each answers 2xx with both stores up.
ROUTE_CLASSES = [
    ("search", "POST", f"{API}/search", {"query": "quote"}),
    ("chat", "POST", f"{API}/chat", {"question": "what is a quote?"}),
    ("feedback", "POST", f"{API}/feedback", {"request_id": "r1", "rating": 1}),
    ("read", "GET", f"{API}/corpora", None),
    ("read", "POST", f"{API}/chunks/batch-get",
     {"chunk_ids": ["00000000-0000-0000-0000-000000000001"], "index_version": "v1"}),
    ("files", "GET", f"{API}/files/docs@1/guide/page1.md", None),
    ("admin", "GET", f"{API}/internal/index/status?corpus=docs@1", None),
    ("mcp", "POST", "/mcp", MCP_LIST),
]
IDS = [f"{c}:{p.rsplit('/', 1)[-1]}" for c, _, p, _ in ROUTE_CLASSES]


@dataclass
class Deployment:
    mesh: Mesh
    url: str
    token: str

    def call(self, method: str, path: str, body: dict | None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {self.token}", **(MCP_HEADERS if path == "/mcp" else {})}
        return httpx.request(method, self.url + path, json=body, headers=headers, timeout=30)


@pytest.fixture(scope="module")
def deployment(private_stores, tmp_path_factory) -> Iterator[Deployment]:
    import asyncio

    from ragmesh_common.pg import create_pool
    from ragmesh_gateway.store.database import migrate
    from ragmesh_gateway.access.token_store import TokenStore

    schema = f"gwdown_{uuid.uuid4().hex[:10]}"

    async def admin_token() -> str:
        pool = await create_pool(private_stores.pg_url, schema=schema)
        try:
            await migrate(pool, schema=schema)
            return (await TokenStore(pool).create("ops", ["rag:admin"]))[1]
        finally:
            await pool.close()

    token = asyncio.run(admin_token())
    root = tmp_path_factory.mktemp("files")
    (root / "guide").mkdir()
    (root / "guide" / "page1.md").write_text("# Page one\n", encoding="utf-8")
    with running_mesh() as mesh:
        settings = mesh.settings(
            auth_mode="tokens", postgres_url=private_stores.pg_url, db_schema=schema,
            redis_url=private_stores.redis_url, rate_limits="*=100/100",
            rate_limit_prefix=f"gwdown:{uuid.uuid4().hex[:8]}", corpus_roots={"docs@1": str(root)},
        )
        with serve_in_thread(create_app(settings)) as url:
            yield Deployment(mesh, url, token)


@pytest.fixture
def stores(private_stores):
    yield private_stores
    private_stores.ensure()


@pytest.mark.parametrize(("route_class", "method", "path", "body"), ROUTE_CLASSES, ids=IDS)
def test_each_route_class_answers_with_both_stores_up(deployment, route_class, method, path, body) -> None:
    response = deployment.call(method, path, body)
    assert 200 <= response.status_code < 300, response.text
    assert response.headers["ratelimit-remaining"]


# One outage per test, every route class inside it: a PostgreSQL restart costs seconds.

def test_redis_down_fails_open_without_claiming_a_budget(deployment, stores) -> None:
    stores.stop_redis()
    for route_class, method, path, body in ROUTE_CLASSES:
        response = deployment.call(method, path, body)
        assert 200 <= response.status_code < 300, (route_class, response.text)
        assert not [h for h in response.headers if h.startswith("ratelimit-")], (route_class, dict(response.headers))
        assert "ratelimit" in response.headers["ragmesh-degraded"], route_class


def test_chat_with_redis_down_answers_without_memory(deployment, stores) -> None:
    stores.stop_redis()
    response = deployment.call("POST", f"{API}/chat", {"question": "what is a quote?"})
    assert response.status_code == 200, response.text
    assert "session_memory" in response.json()["degraded"]


def test_postgres_down_is_a_coded_503_with_retry_after(deployment, stores) -> None:
    stores.stop_postgres()
    for route_class, method, path, body in ROUTE_CLASSES:
        response = deployment.call(method, path, body)
        assert response.status_code == 503, (route_class, response.text)
        assert response.json()["code"] == "UNAVAILABLE", route_class
        assert int(response.headers["retry-after"]) >= 1, route_class
    assert httpx.get(deployment.url + "/health/live").status_code == 200


def test_the_first_request_after_both_restart_is_served(deployment, stores) -> None:
    for _, method, path, body in ROUTE_CLASSES:
        assert deployment.call(method, path, body).status_code < 300  # pooled connections in use
    stores.stop_postgres()
    stores.stop_redis()
    stores.ensure()
    for route_class, method, path, body in ROUTE_CLASSES:
        response = deployment.call(method, path, body)
        assert 200 <= response.status_code < 300, (route_class, response.text)
        # Counted again at once: a bucket was spent (a fail-open answer would claim all 100) and
        # nothing is flagged degraded (the stale Redis connection was retried, not given up on).
        assert int(response.headers["ratelimit-remaining"]) < 100, (route_class, dict(response.headers))
        assert "ragmesh-degraded" not in response.headers, route_class
