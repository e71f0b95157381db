"""`ragmesh answer` and `ragmesh search` for a person at a terminal: the answer (or the passages),
then numbered citations with the file, its lines and a URL that opens them.

Only what the gateway sent is shown; a relative URL (``/api/rag/v1/source/...``) is joined to the
gateway the command talked to, so that a terminal can open it. The contract JSON (``--json``, or any
stdout that is not a terminal) is built elsewhere and never from this text.
"""

from __future__ import annotations

import textwrap
from typing import Any

WIDTH = 100


def absolute(url: str | None, gateway: str) -> str:
    if not url:
        return ""
    return gateway.rstrip("/") + url if url.startswith("/") else url


def where(source: dict[str, Any]) -> str:
    """``guide/page6.md lines 6-9`` (or ``page 3`` of a PDF)."""
    path = source.get("source_path") or source.get("title") or source.get("doc_id") or "?"
    lines = source.get("source_lines") or []
    if len(lines) == 2:
        span = f"line {lines[0]}" if lines[0] == lines[1] else f"lines {lines[0]}-{lines[1]}"
        return f"{path} {span}"
    if source.get("page") is not None:
        return f"{path} page {source['page']}"
    return str(path)


def _citation(label: str, source: dict[str, Any], gateway: str, *, quote: bool) -> list[str]:
    heading = " > ".join(source.get("heading_path") or []) or source.get("title") or ""
    out = [f"{label} {where(source)}" + (f" — {heading}" if heading else "") + f"  ({source.get('corpus', '')})"]
    if quote and source.get("quote"):
        out += textwrap.wrap(" ".join(str(source["quote"]).split()), WIDTH, initial_indent="    \u201c",
                             subsequent_indent="     ")
        out[-1] += "\u201d"
    url = absolute(source.get("url"), gateway)
    if url:
        out.append(f"    {url}")
    return out


def _versions(document: dict[str, Any]) -> str:
    versions = document.get("index_versions") or ([document["index_version"]] if document.get("index_version") else [])
    return ("index " + ", ".join(versions)) if versions else "no index version"


def answer_text(document: dict[str, Any], gateway: str) -> str:
    """The answer, its status line, then each source by its [S#] label."""
    out = [document.get("answer", "").strip() or "(no answer)"]
    if document.get("sources"):
        out.append("")
    for source in document.get("sources") or []:
        out += _citation(f"[{source.get('source_id', '?')}]", source, gateway, quote=False)
    return _with_status(out, document.get("answer_status") or "?", document)


def search_text(document: dict[str, Any], gateway: str) -> str:
    """Each passage numbered, with its quote, then the search's own status line."""
    out: list[str] = []
    results = document.get("results") or []
    for n, result in enumerate(results, 1):
        out += _citation(f"{n}.", result, gateway, quote=True)
    if not results:
        out.append("no passage found" + (f": {document['hint']}" if document.get("hint") else ""))
    return _with_status(out, f"{len(results)} result{'s' if len(results) != 1 else ''}", document)


def _with_status(out: list[str], first: str, document: dict[str, Any]) -> str:
    """The lines, then the status line every form ends with: ``first``, the index versions, the
    degraded flags and the request id."""
    status = [first, _versions(document)]
    if document.get("degraded"):
        status.append("degraded: " + ", ".join(document["degraded"]))
    if document.get("request_id"):
        status.append(f"request {document['request_id']}")
    return "\n".join([*out, "", "(" + "; ".join(status) + ")"]) + "\n"
