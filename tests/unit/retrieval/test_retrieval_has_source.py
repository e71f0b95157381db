"""CorpusDirectory.has_source: is a file part of a corpus's active index (the gateway's /files check)?"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ragmesh_retrieval.domain.catalog import CorpusCatalog
from ragmesh_retrieval.domain.reads import CorpusDirectory
from ragmesh_retrieval.domain.search import HybridRetriever

from retrieval_fixtures import Doc, Mesh, MeshFactory

ALPHA = "alpha@1.0"
BETA = "beta@2.0"


async def indexed(mesh: Mesh) -> None:
    await mesh.index(ALPHA, [
        Doc("Retries back off exponentially", "docs/retries.md"),
        Doc("Timeouts are per call", "docs/guide/timeouts.md"),
        Doc("A second chunk of the same page", "docs/guide/timeouts.md"),
    ], index_version="v1", activate=True)
    # v2 drops docs/retries.md and is the active version from now on.
    await mesh.index(ALPHA, [Doc("Timeouts are per call", "docs/guide/timeouts.md")], index_version="v2")
    await mesh.index(BETA, [Doc("Internal notes", "internal/notes.md")], index_version="v1",
                     visibility="internal")


@pytest.fixture(params=["qdrant-local", "qdrant-edge"])
async def any_mesh(request, make_mesh: MeshFactory, tmp_path: Path) -> AsyncIterator[Mesh]:
    mesh = await make_mesh()
    if request.param == "qdrant-edge":
        edge = pytest.importorskip("ragmesh_common.vectorstore.edge", reason="qdrant-edge-py is not installed")
        store = edge.EdgeVectorStore(tmp_path / "edge")
        catalog = CorpusCatalog(store, ttl_s=60.0)
        mesh = Mesh(store, mesh.embedder, catalog,
                    HybridRetriever(store, catalog, mesh.retriever.embedder, mesh.retriever.encoders, mesh.limits),
                    CorpusDirectory(store, catalog), mesh.limits)
        yield mesh
        await store.close()
        return
    yield mesh


async def test_files_of_the_active_index_are_found_with_its_version(any_mesh: Mesh) -> None:
    await indexed(any_mesh)
    hit = await any_mesh.directory.has_source(ALPHA, "docs/guide/timeouts.md", [ALPHA])
    assert hit.found and hit.index_version == "v2"
    # The stored form is normalised the same way as a path prefix.
    assert (await any_mesh.directory.has_source(ALPHA, "/docs/guide/timeouts.md", [ALPHA])).found


async def test_files_outside_the_active_index_are_not_found(any_mesh: Mesh) -> None:
    await indexed(any_mesh)
    directory = any_mesh.directory
    # Indexed only in v1, which is no longer active.
    assert not (await directory.has_source(ALPHA, "docs/retries.md", [ALPHA])).found
    # A folder holding indexed files is not itself a source file; nor is a name prefix.
    assert not (await directory.has_source(ALPHA, "docs/guide", [ALPHA])).found
    assert not (await directory.has_source(ALPHA, "docs/guide/time", [ALPHA])).found
    assert not (await directory.has_source(ALPHA, "never/indexed.md", [ALPHA])).found
    assert not (await directory.has_source(ALPHA, "", [ALPHA])).found
    assert not (await directory.has_source(ALPHA, "x" * 2000, [ALPHA])).found
    assert not (await directory.has_source("gamma@1", "docs/guide/timeouts.md", ["gamma@1"])).found


async def test_an_unreadable_corpus_answers_like_an_unknown_one(any_mesh: Mesh) -> None:
    await indexed(any_mesh)
    directory = any_mesh.directory
    assert (await directory.has_source(BETA, "internal/notes.md", [BETA])).found
    hidden = await directory.has_source(BETA, "internal/notes.md", [ALPHA])
    unknown = await directory.has_source("gamma@1", "internal/notes.md", [ALPHA])
    assert hidden == unknown and not hidden.found and hidden.index_version == ""
    # The ACL is the corpus itself: a file of BETA is not found by asking about ALPHA.
    assert not (await directory.has_source(ALPHA, "internal/notes.md", [ALPHA, BETA])).found
