"""Corpus ACL, default deny, on every surface: a corpus the caller may not read is indistinguishable
from one that does not exist. Each pair of answers below must be byte-identical apart from the
request id (and the id the request itself named), and no answer may carry the hidden corpus's name
or text. Checked against a retrieval double that honours the ACL, and again with one that leaks,
to show the gateway's own filter.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from gateway_mesh import Mesh
from loopback_server import serve
from gateway_tokens import (  # noqa: F401 - fixtures
    INTERNAL,
    INTERNAL_TEXT,
    bearer,
    schema,
    token_app,
    tokens,
    with_internal_corpus,
)

ABSENT = "ghost@1"
API = "/api/rag/v1"
PAGE = "guide/page.md"


def normalized(raw: str, *ids: str) -> str:
    """The answer with its request id and the ids a request named replaced by placeholders."""
    for n, value in enumerate(ids):
        raw = raw.replace(value, f"<id{n}>")
    return raw


def rest_text(response: httpx.Response, *named: str) -> str:
    return normalized(response.text, response.headers["x-request-id"], *named)


def tool_text(result, *named: str) -> str:
    payload = result.structured_content if result.structured_content is not None else {}
    request_id = payload.get("request_id", "") if isinstance(payload, dict) else ""
    body = json.dumps({"is_error": result.is_error, "structured": payload,
                       "text": [c.text for c in result.content]}, sort_keys=True)
    return normalized(body, *([request_id] if request_id else []), *named)


def app_for(mesh: Mesh, pg_url: str, schema: str, root: Path):
    roots = {"docs@1": str(root), INTERNAL: str(root)}
    return token_app(mesh, pg_url, schema, corpus_roots=roots)


@pytest.fixture
def corpus_root(tmp_path: Path) -> Path:
    (tmp_path / "guide").mkdir()
    (tmp_path / PAGE).write_text(f"{INTERNAL_TEXT} on disk\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("backend", ["honours-acl", "leaks"])
async def test_rest_routes_answer_forbidden_like_absent(
    mesh: Mesh, pg_url: str, schema: str, tokens: dict[str, str], corpus_root: Path, backend: str
) -> None:
    with_internal_corpus(mesh, chunks=3)
    mesh.retrieval.honour_acl = backend == "honours-acl"
    mesh.retrieval.indexed_files = {(INTERNAL, PAGE)}
    hidden_id, absent_id = mesh.retrieval.chunks[-1].chunk_id, str(uuid.uuid4())
    headers = bearer(tokens["asker"])  # search, read and answer; no grant on the internal corpus
    pairs: list[tuple[str, str, str]] = []
    bodies: list[str] = []
    async with serve(app_for(mesh, pg_url, schema, corpus_root)) as base_url:
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as http:

            async def pair(name: str, method: str, make, *named) -> None:
                responses = []
                for corpus, ident in ((INTERNAL, named[0] if named else ""), (ABSENT, named[1] if named else "")):
                    path, body = make(corpus, ident)
                    responses.append(await http.request(method, path, json=body))
                forbidden, absent = responses
                bodies.extend(r.text for r in responses)
                assert forbidden.status_code == absent.status_code, name
                pairs.append((name, rest_text(forbidden, named[0] if named else ""),
                              rest_text(absent, named[1] if named else "")))

            await pair("search", "POST", lambda c, _: (f"{API}/search", {"query": "q", "filters": {"corpus": c}}))
            await pair("chat", "POST", lambda c, _: (f"{API}/chat", {"question": "q", "filters": {"corpus": c}}))
            await pair("batch-get", "POST",
                       lambda _, i: (f"{API}/chunks/batch-get", {"chunk_ids": [i]}), hidden_id, absent_id)
            await pair("files", "GET", lambda c, _: (f"{API}/files/{c}/{PAGE}", None))
            await pair("status", "GET", lambda c, _: (f"{API}/internal/index/status?corpus={c}", None))
            unfiltered = await http.post(f"{API}/search", json={"query": "q", "top_k": 50})
            listing = await http.get(f"{API}/corpora")
            stats = await http.get(f"{API}/stats")
            bodies.extend(r.text for r in (unfiltered, listing, stats))
        mesh.retrieval.corpora = [c for c in mesh.retrieval.corpora if c.corpus != INTERNAL]
        mesh.retrieval.chunks = [c for c in mesh.retrieval.chunks if c.corpus != INTERNAL]
    # The same listing and totals once the internal corpus really is gone (a fresh app: no cache).
    async with serve(app_for(mesh, pg_url, schema, corpus_root)) as base_url:
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=30) as http:
            listing_without = await http.get(f"{API}/corpora")
            stats_without = await http.get(f"{API}/stats")
    pairs.append(("corpora", rest_text(listing), rest_text(listing_without)))
    pairs.append(("stats", rest_text(stats), rest_text(stats_without)))

    assert unfiltered.status_code == 200 and unfiltered.json()["results"]
    assert all(r["corpus"] == "docs@1" for r in unfiltered.json()["results"])
    differing = [name for name, forbidden, absent in pairs if forbidden != absent]
    assert not differing, [p for p in pairs if p[0] in differing]
    leaks = [b for b in bodies if INTERNAL in b or INTERNAL_TEXT in b]
    assert not leaks, leaks


async def test_every_mcp_tool_answers_forbidden_like_absent(
    mesh: Mesh, pg_url: str, schema: str, tokens: dict[str, str], corpus_root: Path
) -> None:
    with_internal_corpus(mesh, chunks=3)
    mesh.retrieval.honour_acl = False  # the gateway's own filter is what is under test
    hidden_id, absent_id = mesh.retrieval.chunks[-1].chunk_id, str(uuid.uuid4())
    calls = {
        "search_articles": lambda c, _: {"query": "q", "filters": {"corpus": c}},
        "answer_from_articles": lambda c, _: {"question": "q", "filters": {"corpus": c}},
        "get_article_chunks": lambda _, i: {"chunk_ids": [i]},
    }
    pairs, texts = [], []

    async def session(base_url: str):
        http = httpx2.AsyncClient(headers=bearer(tokens["asker"]), timeout=30)
        return http, Client(streamable_http_client(f"{base_url}/mcp", http_client=http))

    async with serve(app_for(mesh, pg_url, schema, corpus_root)) as base_url:
        http, client = await session(base_url)
        async with http, client:
            for tool, make in calls.items():
                named = (hidden_id, absent_id) if tool == "get_article_chunks" else ("", "")
                forbidden = await client.call_tool(tool, make(INTERNAL, named[0]))
                absent = await client.call_tool(tool, make(ABSENT, named[1]))
                pairs.append((tool, tool_text(forbidden, named[0]), tool_text(absent, named[1])))
                texts.extend(tool_text(r) for r in (forbidden, absent))
            unfiltered = await client.call_tool("search_articles", {"query": "q", "top_k": 50})
            listing = await client.call_tool("list_corpora", {})
            stats = await client.call_tool("knowledge_base_stats", {})
            texts.extend(tool_text(r) for r in (unfiltered, listing, stats))
        mesh.retrieval.corpora = [c for c in mesh.retrieval.corpora if c.corpus != INTERNAL]
    async with serve(app_for(mesh, pg_url, schema, corpus_root)) as base_url:
        http, client = await session(base_url)
        async with http, client:
            listing_without = await client.call_tool("list_corpora", {})
            stats_without = await client.call_tool("knowledge_base_stats", {})
    pairs.append(("list_corpora", tool_text(listing), tool_text(listing_without)))
    pairs.append(("knowledge_base_stats", tool_text(stats), tool_text(stats_without)))

    assert not unfiltered.is_error and unfiltered.structured_content["results"]
    assert {p[0] for p in pairs} == {
        "search_articles", "answer_from_articles", "get_article_chunks", "list_corpora", "knowledge_base_stats"}
    differing = [p for p in pairs if p[1] != p[2]]
    assert not differing, differing
    leaks = [t for t in texts if INTERNAL in t or INTERNAL_TEXT in t]
    assert not leaks, leaks


async def test_a_grant_opens_the_corpus_on_every_surface(
    mesh: Mesh, pg_url: str, schema: str, tokens: dict[str, str], corpus_root: Path
) -> None:
    """The control: the same requests with a grant do reach the internal corpus."""
    with_internal_corpus(mesh, chunks=3)
    mesh.retrieval.indexed_files = {(INTERNAL, PAGE)}
    async with serve(app_for(mesh, pg_url, schema, corpus_root)) as base_url:
        async with httpx.AsyncClient(base_url=base_url, headers=bearer(tokens["granted"]), timeout=30) as http:
            search = await http.post(f"{API}/search", json={"query": "q", "filters": {"corpus": INTERNAL}})
            chunks = await http.post(
                f"{API}/chunks/batch-get", json={"chunk_ids": [mesh.retrieval.chunks[-1].chunk_id]}
            )
            page = await http.get(f"{API}/files/{INTERNAL}/{PAGE}")
            listing = await http.get(f"{API}/corpora")
    assert INTERNAL_TEXT in search.text and INTERNAL_TEXT in chunks.text
    assert page.status_code == 200 and INTERNAL_TEXT in page.text
    assert INTERNAL in [c["corpus"] for c in listing.json()["corpora"]]
