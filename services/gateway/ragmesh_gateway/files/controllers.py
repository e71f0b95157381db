"""GET /files/{corpus}/{path}: an original file from the corpus root."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get
from litestar.openapi.spec import Example
from litestar.params import Parameter
from litestar.response import File

from ragmesh_gateway.access.ports import Caller, RouteClass
from ragmesh_gateway.access.tokens import Scope
from ragmesh_gateway.files.service import FileService
from ragmesh_gateway.web.errors import error_responses

API = "/api/rag/v1"

# Corpus files are untrusted: a stored HTML or SVG page must not run script on the gateway's
# origin. PDFs are exempt because browsers refuse to show a PDF inside a sandbox.
_UNTRUSTED_CONTENT = {
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "sandbox; default-src 'none'",
}


class FilesController(Controller):
    path = API
    tags = ["files"]
    # Whoever may chat with a corpus may open its citations (anonymous visitors: public corpora).
    opt = {"route_class": RouteClass.FILES, "scope": (Scope.READ, Scope.ANSWER)}

    @get(
        "/files/{corpus:str}/{path:path}",
        summary="Download an original document",
        description="Unreadable, missing and refused paths all answer the same 404 NOT_FOUND.",
        responses=error_responses(400, 401, 404, 429),
    )
    async def download(
        self,
        corpus: Annotated[str, Parameter(description="Corpus id", examples=[Example(value="docs@1")])],
        path: Annotated[str, Parameter(description="Path inside the corpus root (a chunk's source_path)",
                                       examples=[Example(value="guide/page1.md")])],
        caller: Caller,
        files: FileService,
    ) -> File:
        found = await files.locate(corpus, path.removeprefix("/"), caller)
        headers = dict(_UNTRUSTED_CONTENT)
        if found.media_type == "application/pdf":
            headers.pop("Content-Security-Policy")
        return File(
            path=found.path,
            filename=found.filename,
            media_type=found.media_type,
            content_disposition_type="inline",
            headers=headers,
        )
