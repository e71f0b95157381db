"""GET /source/{corpus}/{path}?lines=A-B: the file a citation opens, as an HTML page for browsers.

Same lookup and refusals as /files (one 404 for everything a caller may not see), same access:
whoever may read or chat with the corpus (``rag:read`` or ``rag:answer``, so anonymous site
visitors open citations of public corpora, never of private ones). Files that are not text (PDF,
images) are sent to their raw /files copy.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from urllib.parse import quote

from litestar import Controller, Response, get
from litestar.params import Parameter
from litestar.response import Redirect

from ragmesh_gateway.access.ports import Caller, RouteClass
from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.citations import API
from ragmesh_gateway.files.service import FileService
from ragmesh_gateway.files.source_view import LINES_PATTERN, parse_lines, render_source_view
from ragmesh_gateway.web.errors import error_responses

_TEXT_TYPES = ("text/", "application/json", "application/toml", "application/yaml", "application/x-ipynb+json")
# No script at all, and the document's own text can never become markup (it is escaped anyway).
_VIEW_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; base-uri 'none'; "
                               "form-action 'none'",
    "Referrer-Policy": "no-referrer",
}


class SourceViewController(Controller):
    path = API
    tags = ["files"]
    opt = {"route_class": RouteClass.FILES, "scope": (Scope.READ, Scope.ANSWER)}

    @get(
        "/source/{corpus:str}/{path:path}",
        summary="Open a cited document with the cited lines marked",
        description="An HTML page of the file, every line numbered, `lines` (12 or 12-18) marked; link to "
        "`#L12` to scroll them into view. The raw file stays at /files. Unreadable, missing and refused "
        "paths all answer the same 404 NOT_FOUND.",
        responses=error_responses(400, 401, 404, 429),
    )
    async def view(
        self, corpus: str, path: str, caller: Caller, files: FileService,
        lines: str | None = Parameter(query="lines", default=None, max_length=32, pattern=LINES_PATTERN),
    ) -> Response | Redirect:
        cited = parse_lines(lines)
        relative = path.removeprefix("/")
        found = await files.locate(corpus, relative, caller)
        raw_url = f"{API}/files/{quote(corpus, safe='@')}/{quote(relative)}"
        if not found.media_type.startswith(_TEXT_TYPES):
            return Redirect(path=raw_url, status_code=303)
        text = await asyncio.to_thread(_read_text, found.path)
        page = render_source_view(title=f"{corpus} · {relative}", text=text, raw_url=raw_url, cited=cited)
        return Response(content=page, media_type="text/html", headers=dict(_VIEW_HEADERS))


def _read_text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")
