"""Schemathesis over the gateway's own OpenAPI document, as a user would run it:
``st run <gateway>/schema/openapi.json --checks all`` with every phase, the stateful one included
(it follows the document's links: build -> promote -> rollback, search -> batch-get, chat ->
feedback). Against a real uvicorn with gRPC doubles downstream.

--checks all holds the document and the server to each other both ways: no 5xx, every status,
content type and header documented, every response valid against its schema (SSE events
included), everything the schema allows accepted and everything it forbids refused. Issue 12
found 2 server errors in 33,602 requests and a document that disagreed with the server (the SSE
envelope, Last-Modified, additionalProperties, values allowed but refused, undocumented 404/409).

Bounded: a fixed seed and ``EXAMPLES`` per operation give over a thousand test cases in about a
minute; the seed makes a failure reproducible with the printed ``st run`` line.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("schemathesis", reason="schemathesis is not installed")

from gateway_mesh import running_mesh  # noqa: E402
from loopback_server import serve_in_thread  # noqa: E402
from ragmesh_gateway.app import create_app  # noqa: E402

EXAMPLES = 50
SEED = 1
MIN_CASES = 1000
ST = Path(sys.executable).with_name("st")


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
    # The document's example file (guide/page1.md of docs@1) exists, so downloads reach a 200.
    root = tmp_path_factory.mktemp("fuzz-corpus")
    (root / "guide").mkdir()
    (root / "guide" / "page1.md").write_text("# Page one\n", encoding="utf-8")
    with running_mesh() as mesh:
        app = create_app(
            mesh.settings(corpus_roots={"docs@1": str(root)}, postgres_url=pg_url, db_schema=feedback_schema)
        )
        with serve_in_thread(app) as base_url:
            yield base_url


def test_schemathesis_checks_all_every_phase_zero_failures(gateway_url: str, tmp_path: Path) -> None:
    command = [str(ST), "run", f"{gateway_url}/schema/openapi.json", "--checks", "all",
               "--phases", "examples,coverage,fuzzing,stateful", "--max-examples", str(EXAMPLES),
               "--seed", str(SEED), "--workers", "1", "--no-color"]
    # In a folder of its own: st keeps a cache of what it found (.schemathesis/) in its working folder.
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=tmp_path)
    report = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(command)}\n{report[-8000:]}"
    generated = re.search(r"(\d+) generated, (\d+) passed", report)
    assert generated, report[-3000:]
    assert int(generated.group(1)) >= MIN_CASES and generated.group(1) == generated.group(2), generated.group(0)
    assert re.search(r"✅ Stateful", report), "the stateful phase ran (links between operations)"
