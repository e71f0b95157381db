"""The gateway process's logs carry hashes, ids, versions, timings and status: never a query, a
document's text or a token, whatever the request looked like (valid, refused or malformed)."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from ragmesh_common.pg import create_pool
from ragmesh_common.telemetry import query_hash

from gateway_mesh import Mesh
from gateway_process import gateway_env, running_gateway
from ragmesh_gateway.access.token_store import TokenStore
from ragmesh_gateway.store.database import migrate

QUERY = "zebra-quokka-7431 how do I rotate the frobnicator"
QUESTION = "walrus-lantern-5520 which flag turns the widget blue"
DOCUMENT_TEXT = "platypus-ledger-9981 the internal rotation key lives in vault"
FORGED = "rmk_00000000feedface_" + "F" * 43


@pytest.fixture
async def token(pg_url: str, unique_schema) -> AsyncIterator[tuple[str, str]]:
    schema = unique_schema("gwlog")
    pool = await create_pool(pg_url, schema=schema)
    await migrate(pool, schema=schema)
    _, plaintext = await TokenStore(pool).create("log-test", ["rag:search", "rag:read", "rag:answer"])
    await pool.close()
    yield schema, plaintext


def sensitive_strings(plaintext: str) -> list[str]:
    secret = plaintext.split("_", 2)[2]
    return [QUERY, QUESTION, DOCUMENT_TEXT, plaintext, secret, FORGED, FORGED.split("_", 2)[2],
            "zebra-quokka-7431", "walrus-lantern-5520", "platypus-ledger-9981"]


@pytest.mark.parametrize("log_level", ["INFO", "DEBUG"])
async def test_logs_never_carry_queries_documents_or_tokens(
    mesh: Mesh, tmp_path: Path, pg_url: str, redis_url: str, token: tuple[str, str], log_level: str
) -> None:
    schema, plaintext = token
    for chunk in mesh.retrieval.chunks:
        chunk.quote = f"{DOCUMENT_TEXT} ({chunk.chunk_id[-2:]})"
    settings = mesh.settings()
    env = gateway_env(
        RAGMESH_RETRIEVAL_ADDR=settings.retrieval_addr,
        RAGMESH_RERANK_ADDR=settings.rerank_addr,
        RAGMESH_GENERATION_ADDR=settings.generation_addr,
        RAGMESH_INDEXER_ADDR=settings.indexer_addr,
        RAGMESH_CORPORA="docs@1",
        RAGMESH_AUTH_MODE="tokens",
        RAGMESH_ALLOW_ANONYMOUS="false",
        RAGMESH_POSTGRES_URL=pg_url,
        RAGMESH_GATEWAY_DB_SCHEMA=schema,
        RAGMESH_REDIS_URL=redis_url,
        RAGMESH_RATE_LIMITS="*=100/100",
        RAGMESH_RATE_LIMIT_PREFIX=f"ragmesh:test:{uuid.uuid4().hex[:12]}",
        RAGMESH_LOG_LEVEL=log_level,
    )
    good = {"Authorization": f"Bearer {plaintext}"}
    with running_gateway(tmp_path, env) as gateway:
        async with httpx.AsyncClient(base_url=gateway.url, timeout=30) as http:
            search = await http.post("/api/rag/v1/search", json={"query": QUERY}, headers=good)
            assert search.status_code == 200 and DOCUMENT_TEXT in search.text
            chat = await http.post("/api/rag/v1/chat", json={"question": QUESTION}, headers=good)
            assert chat.status_code == 200
            stream = await http.post("/api/rag/v1/chat/stream", json={"question": QUESTION}, headers=good)
            assert stream.status_code == 200
            chunk_ids = [r["chunk_id"] for r in search.json()["results"][:2]]
            batch = await http.post("/api/rag/v1/chunks/batch-get", json={"chunk_ids": chunk_ids}, headers=good)
            assert batch.status_code == 200 and DOCUMENT_TEXT in batch.text
            refused = [
                await http.post("/api/rag/v1/search", json={"query": QUERY}),
                await http.post("/api/rag/v1/search", json={"query": QUERY},
                                headers={"Authorization": f"Bearer {FORGED}"}),
                await http.post("/api/rag/v1/search", json={"query": QUERY},
                                headers={"Authorization": f"Basic {FORGED}"}),
                await http.post("/api/rag/v1/search", content=f'{{"query": "{QUERY}", "bogus": 1}}'.encode(),
                                headers={**good, "content-type": "application/json"}),
                await http.post("/api/rag/v1/search", content=f'{{"query": "{QUERY}'.encode() + b"\xff",
                                headers={**good, "content-type": "application/json"}),
                await http.get(f"/api/rag/v1/files/docs@1/{QUERY.replace(' ', '-')}.md", headers=good),
                await http.get(f"/api/rag/v1/{QUERY.replace(' ', '-')}", headers=good),
            ]
            assert [r.status_code for r in refused] == [401, 401, 401, 400, 400, 404, 404]
        async with httpx2.AsyncClient(headers=good) as mcp_http:
            async with Client(streamable_http_client(f"{gateway.url}/mcp", http_client=mcp_http)) as client:
                found = await client.call_tool("search_articles", {"query": QUERY})
                answered = await client.call_tool("answer_from_articles", {"question": QUESTION})
                bad = await client.call_tool("search_articles", {"query": QUERY, "bogus": True})
        assert not found.is_error and not answered.is_error and bad.is_error
    logs = gateway.logs()

    lines = [json.loads(line) for line in logs.splitlines() if line.startswith("{")]
    assert any(line.get("msg") == "search" for line in lines), logs[-2000:]
    # What the logs do carry: the query's hash, request ids, routes and statuses.
    assert query_hash(QUERY) in logs
    assert any(line.get("route") == "/api/rag/v1/search" and line.get("status") == 401 for line in lines)
    leaked = [s for s in sensitive_strings(plaintext) if s in logs]
    assert not leaked, [line for line in logs.splitlines() if any(s in line for s in leaked)][:5]
