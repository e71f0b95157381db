"""Vector-store test fixtures and factories: every adapter that runs in-process behind the same fixtures,
so the contract tests run once per adapter and local mode and Qdrant Edge are held to one behaviour."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from qdrant_client import QdrantClient

from ragmesh_common.index_schema import CollectionMeta, CorpusMeta
from ragmesh_common.vectorstore.edge import EdgeVectorStore
from ragmesh_common.vectorstore.port import SparseVector, StoredPoint, VectorStorePort
from ragmesh_common.vectorstore.qdrant import QdrantVectorStore

META = CollectionMeta(
    index_version="v1",
    corpus=CorpusMeta(corpus="docs@1", library="docs", version="1", license="MIT", source_url="https://x.org"),
    embedding_model="m",
    vector_size=3,
    lexical_version="bm25-r1-x",
    lexical_config={"language": "english", "stopwords": ["a", "the"]},
    avg_len=12.5,
    documents=2,
    chunks=3,
)


def opener(kind: str, root: Path) -> Callable[[], VectorStorePort]:
    """A function that opens the ``kind`` adapter over ``root``; called again, it reopens it."""
    if kind == "local-memory":
        return lambda: QdrantVectorStore(QdrantClient(":memory:"))
    if kind == "local-disk":
        return lambda: QdrantVectorStore(QdrantClient(path=str(root / "local")))
    if kind == "edge":
        return lambda: EdgeVectorStore(root / "edge")
    raise ValueError(kind)


StoreOpener = Callable[[], Awaitable[VectorStorePort]]


@pytest.fixture(params=["local-memory", "local-disk", "edge"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorStorePort]:
    adapter = opener(request.param, tmp_path)()
    yield adapter
    await adapter.close()


@pytest.fixture(params=["local-disk", "edge"])
def persistent(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], VectorStorePort]:
    """For tests that close a store and open it again over the same files."""
    return opener(request.param, tmp_path)


def point(
    source_path: str,
    dense: list[float] | None,
    *,
    corpus: str = "docs@1",
    tags: list[str] | None = None,
    sparse: SparseVector | None = None,
    library: str = "docs",
    version: str = "1",
    **extra: object,
) -> StoredPoint:
    return StoredPoint(
        id=str(uuid.uuid4()),
        payload={"corpus": corpus, "source_path": source_path, "tags": tags or [], "library": library,
                 "version": version, **extra},
        dense=dense,
        sparse=sparse if sparse is not None else SparseVector(indices=[1, 7], values=[1.0, 0.5]),
    )
