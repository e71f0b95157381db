"""Where a citation opens: the corpus's own site when it has one, else the gateway's source view.

The indexer writes ``url`` from the corpus's ``--url-base`` (or ``RAGMESH_URL_BASE``); without a
base it is only a slug (``guide/jobs#retries``), which no browser can follow. Such a citation gets
the gateway's source view of its file with the cited lines marked (``/api/rag/v1/source/...``,
root-relative: the gateway's own origin), and a PDF the raw file at its page.
"""

from __future__ import annotations

from urllib.parse import quote

from ragmesh_common.chunk_record import Chunk


API = "/api/rag/v1"


def is_absolute(url: str) -> bool:
    return url.lower().startswith(("https://", "http://"))


def source_view_path(corpus: str, source_path: str, line_start: int = 0, line_end: int = 0) -> str:
    path = f"{API}/source/{quote(corpus, safe='@')}/{quote(source_path, safe='/')}"
    if line_start > 0:
        end = max(line_end, line_start)
        return f"{path}?lines={line_start}-{end}#L{line_start}"
    return path


def citation_url(chunk: Chunk) -> str:
    if is_absolute(chunk.url) or not chunk.source_path:
        return chunk.url
    if chunk.source_path.lower().endswith(".pdf"):
        raw = chunk.download_path or f"{API}/files/{quote(chunk.corpus, safe='@')}/{quote(chunk.source_path)}"
        return f"{raw}#page={chunk.page}" if chunk.page > 0 else raw
    return source_view_path(chunk.corpus, chunk.source_path, chunk.line_start, chunk.line_end)
