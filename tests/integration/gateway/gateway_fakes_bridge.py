"""An app whose search backend raises an unexpected exception, to check the 500 path."""

from __future__ import annotations

from litestar import Litestar

from ragmesh_gateway.app import create_app
from ragmesh_gateway.composition import build_deps
from ragmesh_gateway.search.models import RetrievalQuery, RetrievalResult
from ragmesh_gateway.search.ports import SearchBackend


class ExplodingBackend(SearchBackend):
    async def search(self, query: RetrievalQuery) -> RetrievalResult:
        raise ValueError("secret detail that must stay in the server log")

    async def batch_get(self, chunk_ids, *, index_version, readable_corpora, include_content):
        raise ValueError("secret detail")


def exploding_app(mesh) -> Litestar:
    settings = mesh.settings()
    deps = build_deps(settings)
    deps.search_backend = ExplodingBackend()
    return create_app(settings, deps)
