"""Schemathesis over the gateway's own OpenAPI document: valid and invalid requests for every
operation, against a real uvicorn with gRPC doubles downstream. Zero server errors: every answer is
below 500 (a refused request is a 4xx with a stable ``code``), and no answer carries a stack trace.

Bounded (``EXAMPLES`` per operation, no shrinking) so the whole run stays well under a minute.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed")
from hypothesis import HealthCheck, settings  # noqa: E402 - schemathesis brings hypothesis
from schemathesis import GenerationMode  # noqa: E402

from gateway_mesh import running_mesh  # noqa: E402
from ragmesh_gateway.app import create_app  # noqa: E402
from ragmesh_gateway.openapi import openapi_document  # noqa: E402

EXAMPLES = 30

SCHEMA = schemathesis.openapi.from_dict(openapi_document())
SCHEMA.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=EXAMPLES, no_shrink=True
)


@pytest.fixture(scope="module")
def feedback_schema(pg_url: str) -> Iterator[str]:
    """Feedback is stored in PostgreSQL: a schema of this module's own, dropped afterwards."""
    import asyncpg

    name = f"gwfuzz_{uuid.uuid4().hex[:12]}"
    yield name

    async def drop() -> None:
        conn = await asyncpg.connect(pg_url)
        try:
            await conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        finally:
            await conn.close()

    asyncio.run(drop())


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory: pytest.TempPathFactory, pg_url: str, feedback_schema: str) -> Iterator[str]:
    import uvicorn

    root = tmp_path_factory.mktemp("fuzz-corpus")
    (root / "guide").mkdir()
    (root / "guide" / "page1.md").write_text("# Page one\n", encoding="utf-8")
    with running_mesh() as mesh:
        app = create_app(
            mesh.settings(corpus_roots={"docs@1": str(root)}, postgres_url=pg_url, db_schema=feedback_schema)
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_config=None, access_log=False)
        server = uvicorn.Server(config)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_until_complete, args=(server.serve(),), daemon=True)
        thread.start()
        while not server.started:
            if not thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            threading.Event().wait(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.should_exit = True
            thread.join(15)
            loop.close()


@SCHEMA.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=EXAMPLES)
def test_no_operation_answers_a_server_error(case, gateway_url: str) -> None:
    response = case.call(base_url=gateway_url, timeout=20)
    assert response.status_code < 500, (case.method, case.path, response.status_code, response.text[:500])
    assert "Traceback" not in response.text and 'File "' not in response.text
    if response.status_code >= 400:
        body = response.json()
        # The OpenAI-compatible routes answer OpenAI's error shape; every other route ragmesh's.
        code = body.get("error", {}).get("code") if case.path.startswith("/v1/") else body.get("code")
        assert code, (case.method, case.path, response.status_code, response.text[:500])
