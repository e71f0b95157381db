"""Where a citation opens: the corpus's own site when it has one, else the gateway's source view.

The indexer writes ``url`` from the corpus's ``--url-base`` (or ``RAGMESH_URL_BASE``); without a
base it is only a slug (``guide/jobs#retries``), which no browser can follow. Such a citation gets
the gateway's source view of its file with the cited lines marked (``/api/rag/v1/source/...``,
root-relative: the gateway's own origin), and a PDF the raw file at its page.

A client outside a browser (an MCP agent, an OpenAI client, a script) cannot resolve a root-relative
link, so every answer shape makes it absolute with the gateway's public origin when it knows one:
``RAGMESH_PUBLIC_URL``, else the scheme and Host of the request it answers (every route but the
operations ones answers only the names in ``RAGMESH_ALLOWED_HOSTS``, so a Host that reached a
presenter is one the operator listed). Without either (an in-process MCP client) links stay
root-relative.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from ragmesh_common.chunk_record import Chunk


API = "/api/rag/v1"


def public_origin(public_url: str, scope: Mapping[str, Any] | None) -> str:
    """``https://rag.example.com``: ``public_url`` (RAGMESH_PUBLIC_URL), else the request's own
    scheme and Host header; "" when neither is known."""
    if public_url:
        return public_url.rstrip("/")
    if not scope or scope.get("type") != "http":
        return ""
    host = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), "")
    return f"{scope.get('scheme', 'http')}://{host}" if host else ""


def on_origin(url: str, origin: str) -> str:
    """A root-relative gateway path made absolute on ``origin``; other urls as they are."""
    return f"{origin}{url}" if origin and url.startswith("/") and not url.startswith("//") else url


def is_absolute(url: str) -> bool:
    return url.lower().startswith(("https://", "http://"))


def source_view_path(corpus: str, source_path: str, line_start: int = 0, line_end: int = 0) -> str:
    path = f"{API}/source/{quote(corpus, safe='@')}/{quote(source_path, safe='/')}"
    if line_start > 0:
        end = max(line_end, line_start)
        return f"{path}?lines={line_start}-{end}#L{line_start}"
    return path


def citation_url(chunk: Chunk, origin: str = "") -> str:
    """Where the citation opens; a gateway path is absolute on ``origin`` when one is given."""
    if is_absolute(chunk.url) or not chunk.source_path:
        return chunk.url
    if chunk.source_path.lower().endswith(".pdf"):
        raw = chunk.download_path or f"{API}/files/{quote(chunk.corpus, safe='@')}/{quote(chunk.source_path)}"
        return on_origin(f"{raw}#page={chunk.page}" if chunk.page > 0 else raw, origin)
    view = source_view_path(chunk.corpus, chunk.source_path, chunk.line_start, chunk.line_end)
    return on_origin(view, origin)
