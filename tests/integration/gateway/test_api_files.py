"""GET /files/{corpus}/{path}: originals from the corpus root, nothing outside it, one 404 for all refusals.

Traversal attempts go over a raw socket to a real uvicorn: HTTP clients normalise "../" away
before sending, which would test the client instead of the gateway.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from gateway_auth import StaticAuthenticator
from gateway_mesh import Mesh
from loopback_server import serve
from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.app import create_app
from ragmesh_gateway.composition import build_deps

FILES = "/api/rag/v1/files"


@pytest.fixture
def corpus_tree(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    (root / "guide").mkdir(parents=True)
    (root / "guide" / "intro.md").write_text("# Intro\nhello\n", encoding="utf-8")
    (root / "guide" / "page.html").write_text("<script>alert(1)</script>", encoding="utf-8")
    (root / "manual.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")
    (root / "with space.txt").write_text("spaced\n", encoding="utf-8")
    (root / "guide" / "skipped.md").write_text("excluded from the index\n", encoding="utf-8")
    (root / ".env").write_text("TOKEN=secret\n")
    (tmp_path / "secret.txt").write_text("outside the corpus\n")
    os.symlink(tmp_path / "secret.txt", root / "escape.txt")
    return root


# What the active index holds. escape.txt and .env are listed too, so that the path checks are
# shown to refuse them on their own; guide/skipped.md is on disk but excluded from the index.
INDEXED = ["guide/intro.md", "guide/page.html", "manual.pdf", "with space.txt", "escape.txt", ".env"]


def app_for(mesh: Mesh, root: Path, caller: Caller | None = None):
    mesh.retrieval.indexed_files = {(c, p) for c in ("docs@1", "internal@1") for p in INDEXED}
    settings = mesh.settings(corpus_roots={"docs@1": str(root), "internal@1": str(root)})
    deps = build_deps(settings)
    if caller is not None:
        deps.authenticator = StaticAuthenticator(caller)
    return create_app(settings, deps)


async def raw_get(base_url: str, target: str) -> tuple[int, dict, bytes]:
    """Send the request target byte for byte."""
    parts = urlsplit(base_url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    writer.write(
        f"GET {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nConnection: close\r\n\r\n".encode("latin-1")
    )
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    if headers.get("transfer-encoding") == "chunked":
        body = _unchunk(body)
    return status, headers, body


def _unchunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out


async def test_serves_an_original_file_with_its_type(mesh: Mesh, corpus_tree: Path) -> None:
    async with serve(app_for(mesh, corpus_tree)) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            md = await http.get(f"{FILES}/docs@1/guide/intro.md")
            pdf = await http.get(f"{FILES}/docs@1/manual.pdf")
            html = await http.get(f"{FILES}/docs@1/guide/page.html")
            spaced = await http.get(f"{FILES}/docs@1/with%20space.txt")
    assert md.status_code == 200 and md.text == "# Intro\nhello\n"
    assert md.headers["content-type"] == "text/markdown; charset=utf-8"
    assert md.headers["x-content-type-options"] == "nosniff"
    assert pdf.status_code == 200 and pdf.headers["content-type"] == "application/pdf"
    # Stored HTML is shown sandboxed, never run on the gateway's origin.
    assert html.headers["content-security-policy"].startswith("sandbox")
    assert spaced.status_code == 200 and spaced.text == "spaced\n"


@pytest.mark.parametrize(
    "target",
    [
        f"{FILES}/docs@1/../secret.txt",
        f"{FILES}/docs@1/guide/../../secret.txt",
        f"{FILES}/docs@1/%2e%2e/secret.txt",
        f"{FILES}/docs@1/%2E%2E/%2E%2E/secret.txt",
        f"{FILES}/docs@1/guide%2f..%2f..%2fsecret.txt",
        f"{FILES}/docs@1/..%5csecret.txt",
        f"{FILES}/docs@1//etc/passwd",
        f"{FILES}/docs@1/%2fetc%2fpasswd",
        f"{FILES}/docs@1/escape.txt",
        f"{FILES}/docs@1/.env",
        f"{FILES}/docs@1/guide/intro.md%00.txt",
        f"{FILES}/docs@1/guide/missing.md",
        f"{FILES}/docs@1/guide/skipped.md",
        f"{FILES}/nope@1/guide/intro.md",
        f"{FILES}/docs@1/guide",
        f"{FILES}/../../etc/passwd",
    ],
)
async def test_traversal_and_probing_all_get_the_same_404(mesh: Mesh, corpus_tree: Path, target: str) -> None:
    async with serve(app_for(mesh, corpus_tree)) as base_url:
        status, headers, body = await raw_get(base_url, target)
        _, _, missing = await raw_get(base_url, f"{FILES}/docs@1/guide/missing.md")
    assert status == 404, body
    assert b"outside the corpus" not in body and b"TOKEN=secret" not in body
    strip = lambda raw: {k: v for k, v in json.loads(raw).items() if k != "request_id"}  # noqa: E731
    assert strip(body) == strip(missing) == {"code": "NOT_FOUND", "message": "file not found"}
    assert headers["content-type"].startswith("application/json")


async def test_unreadable_corpus_looks_exactly_like_a_missing_file(mesh: Mesh, corpus_tree: Path) -> None:
    reader = Caller("bob", readable_corpora=frozenset({"docs@1"}), scopes=frozenset({"rag:read"}))
    async with serve(app_for(mesh, corpus_tree, reader)) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            hidden = await http.get(f"{FILES}/internal@1/guide/intro.md")
            missing = await http.get(f"{FILES}/docs@1/guide/nothing.md")
            allowed = await http.get(f"{FILES}/docs@1/guide/intro.md")
    assert hidden.status_code == missing.status_code == 404
    strip = lambda r: {k: v for k, v in r.json().items() if k != "request_id"}  # noqa: E731
    assert strip(hidden) == strip(missing) == {"code": "NOT_FOUND", "message": "file not found"}
    assert allowed.status_code == 200


async def test_only_files_of_the_active_index_are_served(mesh: Mesh, corpus_tree: Path) -> None:
    async with serve(app_for(mesh, corpus_tree)) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            skipped = await http.get(f"{FILES}/docs@1/guide/skipped.md")
            missing = await http.get(f"{FILES}/docs@1/guide/missing.md")
            served = await http.get(f"{FILES}/docs@1/guide/intro.md")
    assert skipped.status_code == missing.status_code == 404
    assert skipped.content.replace(skipped.headers["x-request-id"].encode(), b"") == missing.content.replace(
        missing.headers["x-request-id"].encode(), b""
    )
    assert served.status_code == 200
    checks = [(r.corpus, r.source_path, list(r.readable_corpora)) for r in mesh.retrieval.source_checks]
    assert ("docs@1", "guide/skipped.md", ["docs@1"]) in checks


async def test_retrieval_down_is_unavailable_not_a_served_file(mesh: Mesh, corpus_tree: Path) -> None:
    app = app_for(mesh, corpus_tree)
    await mesh.stop("retrieval")
    async with serve(app) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            response = await http.get(f"{FILES}/docs@1/guide/intro.md")
    assert response.status_code == 503 and response.json()["code"] == "UNAVAILABLE"


# --- the source view a citation opens ---------------------------------------------------------

SOURCE = "/api/rag/v1/source"


async def test_the_source_view_marks_the_cited_lines_and_links_the_raw_file(mesh: Mesh, corpus_tree: Path) -> None:
    async with serve(app_for(mesh, corpus_tree)) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            view = await http.get(f"{SOURCE}/docs@1/guide/intro.md", params={"lines": "2-2"})
            html_page = await http.get(f"{SOURCE}/docs@1/guide/page.html", params={"lines": "1"})
            pdf = await http.get(f"{SOURCE}/docs@1/manual.pdf")
            whole = await http.get(f"{SOURCE}/docs@1/with%20space.txt")
    assert view.status_code == 200 and view.headers["content-type"] == "text/html; charset=utf-8"
    assert '<span id="L1" class="line"><span class="n">1  </span><span class="t"># Intro</span></span>' in view.text
    assert '<mark id="L2" class="line cited"><span class="n">2  </span><span class="t">hello</span></mark>' in view.text
    assert 'href="/api/rag/v1/files/docs@1/guide/intro.md"' in view.text
    csp = view.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp and "<script" not in view.text
    # A stored HTML page is shown as its source, never as markup.
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html_page.text and "<script>" not in html_page.text
    assert pdf.status_code == 303 and pdf.headers["location"] == "/api/rag/v1/files/docs@1/manual.pdf"
    assert whole.status_code == 200 and 'class="line cited"' not in whole.text and "<mark " not in whole.text


@pytest.mark.parametrize("lines", ["x", "0-3", "1-", "-3", "1-2-3", "9" * 40])
async def test_a_bad_line_range_is_a_stable_400(mesh: Mesh, corpus_tree: Path, lines: str) -> None:
    async with serve(app_for(mesh, corpus_tree)) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            response = await http.get(f"{SOURCE}/docs@1/guide/intro.md", params={"lines": lines})
    assert response.status_code == 400 and response.json()["code"] in ("INVALID_ARGUMENT", "VALIDATION_ERROR")


async def test_the_source_view_refuses_like_the_raw_file(mesh: Mesh, corpus_tree: Path) -> None:
    reader = Caller("bob", readable_corpora=frozenset({"docs@1"}), scopes=frozenset({"rag:answer"}))
    async with serve(app_for(mesh, corpus_tree, reader)) as base_url:
        async with httpx.AsyncClient(base_url=base_url) as http:
            hidden = await http.get(f"{SOURCE}/internal@1/guide/intro.md")
            escape = await http.get(f"{SOURCE}/docs@1/escape.txt")
            allowed = await http.get(f"{SOURCE}/docs@1/guide/intro.md")
    assert hidden.status_code == escape.status_code == 404
    assert hidden.json()["code"] == escape.json()["code"] == "NOT_FOUND"
    assert allowed.status_code == 200  # rag:answer (the chat's scope) opens citations
