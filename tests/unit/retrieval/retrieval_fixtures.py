"""Retrieval unit test doubles and factories: a REAL in-memory Qdrant behind the QdrantVectorStore adapter, the real
BM25 encoder, and a deterministic bag-of-words embedder standing in for the model runtime."""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import msgspec
import numpy as np
import pytest
from qdrant_client import QdrantClient

from ragmesh_common.embedders.identity import EmbedderIdentity
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import (
    ChunkPayload,
    CollectionMeta,
    CorpusMeta,
    alias_name,
    collection_name,
)
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.vectorstore.port import SparseVector, StoredPoint
from ragmesh_common.vectorstore.qdrant import QdrantVectorStore

from ragmesh_retrieval.domain.catalog import CorpusCatalog
from ragmesh_retrieval.domain.embedding import CachedEmbedder, Embedder
from ragmesh_retrieval.domain.lexical import QueryEncoders
from ragmesh_retrieval.domain.model import SearchInput, SearchLimits
from ragmesh_retrieval.domain.reads import CorpusDirectory
from ragmesh_retrieval.domain.search import HybridRetriever

DIMENSIONS = 256
MODEL_ID = "test/bag-of-words-256"
_WORD = re.compile(r"\w+")


def bag_of_words_vector(text: str, dimensions: int = DIMENSIONS) -> list[float]:
    """Each word adds a fixed pseudo-random direction: shared words -> high cosine, none -> ~0."""
    total = np.zeros(dimensions)
    for word in _WORD.findall(text.lower()):
        seed = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "little")
        total += np.random.default_rng(seed).standard_normal(dimensions)
    norm = np.linalg.norm(total)
    return (total / norm if norm else total).tolist()


class FakeEmbedder(Embedder):
    """Deterministic embedder; ``failure`` makes it raise like a runtime that is down. ``served``
    stands for what /info would say (an identity); by default the model id alone."""

    def __init__(self, model: str = MODEL_ID, *, dimensions: int = DIMENSIONS) -> None:
        self.model = model
        self.dimensions = dimensions
        self.served: EmbedderIdentity | None = None
        self.calls = 0
        self.failure: RagmeshError | None = None
        self.delay_s = 0.0

    async def model_id(self) -> str:
        if self.failure is not None:
            raise self.failure
        return self.model

    async def identity(self) -> EmbedderIdentity:
        if self.failure is not None:
            raise self.failure
        return self.served or await super().identity()

    async def embed_query(self, text: str) -> list[float]:
        if self.failure is not None:
            raise self.failure
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        self.calls += 1
        return bag_of_words_vector(text, self.dimensions)


@dataclass
class Doc:
    text: str
    source_path: str = "docs/guide.md"
    tags: list[str] = field(default_factory=list)
    parent_content: str = ""
    corpus_label: str | None = None  # payload corpus, when a test needs a mislabelled point
    chunk_id: str = field(default_factory=lambda: str(uuid.uuid4()))


@dataclass
class Mesh:
    """The application services over one in-memory store, plus helpers to index corpora into it."""

    store: QdrantVectorStore
    embedder: FakeEmbedder
    catalog: CorpusCatalog
    retriever: HybridRetriever
    directory: CorpusDirectory
    limits: SearchLimits

    async def index(
        self,
        corpus: str,
        docs: list[Doc],
        *,
        library: str | None = None,
        version: str | None = None,
        index_version: str = "v1",
        activate: bool = True,
        visibility: str = "public",
        lexical_version: str | None = None,
        lexical_config: dict | None = None,
        embedder: EmbedderIdentity | None = None,
    ) -> str:
        library = library or corpus.split("@")[0]
        version = version or (corpus.split("@")[1] if "@" in corpus else "")
        encoder = LexicalEncoder()
        sparse, avg_len = encoder.encode_documents([d.text for d in docs])
        meta = CollectionMeta(
            index_version=index_version,
            corpus=CorpusMeta(corpus=corpus, library=library, version=version, visibility=visibility,
                              license="MIT", source_url=f"https://example.org/{library}"),
            embedding_model=embedder.model if embedder else MODEL_ID,
            vector_size=self.embedder.dimensions,
            lexical_version=lexical_version or encoder.version,
            lexical_config=encoder.config_dict() if lexical_config is None else lexical_config,
            avg_len=avg_len,
            documents=len({d.source_path for d in docs}),
            chunks=len(docs),
            embedder=embedder,
        )
        name = collection_name(corpus, index_version)
        await self.store.create_collection(name, self.embedder.dimensions, meta)
        points = []
        for doc, vector in zip(docs, sparse):
            payload = ChunkPayload(
                chunk_id=doc.chunk_id, parent_id=doc.chunk_id, doc_id=doc.source_path,
                corpus=doc.corpus_label or corpus, library=library, version=version, title=doc.text[:20],
                heading_path=["Guide"], url=f"https://example.org/{doc.source_path}", quote=doc.text,
                source_path=doc.source_path, line_start=1, line_end=3, parent_content=doc.parent_content,
                tags=doc.tags,
            )
            points.append(StoredPoint(
                id=doc.chunk_id, payload=msgspec.to_builtins(payload), dense=bag_of_words_vector(doc.text, self.embedder.dimensions),
                sparse=SparseVector(indices=vector.indices, values=vector.values),
            ))
        await self.store.upsert(name, points)
        if activate:
            await self.store.set_alias(alias_name(corpus), name)
            self.catalog.invalidate()
        return name

    async def search(self, query: str, readable: list[str], top_k: int = 5, **filters) -> object:
        return await self.retriever.search(
            SearchInput(query=query, top_k=top_k, readable_corpora=tuple(readable), **filters)
        )


MeshFactory = Callable[..., Awaitable[Mesh]]


@pytest.fixture
async def make_mesh() -> AsyncIterator[MeshFactory]:
    stores: list[QdrantVectorStore] = []

    async def make(*, dimensions: int = DIMENSIONS, **limits) -> Mesh:
        store = QdrantVectorStore(QdrantClient(":memory:"))
        stores.append(store)
        embedder = FakeEmbedder(dimensions=dimensions)
        search_limits = SearchLimits(**limits)
        catalog = CorpusCatalog(store, ttl_s=60.0)
        cached = CachedEmbedder(embedder)
        retriever = HybridRetriever(store, catalog, cached, QueryEncoders(), search_limits)
        return Mesh(store, embedder, catalog, retriever, CorpusDirectory(store, catalog, cached), search_limits)

    yield make
    for store in stores:
        await store.close()


@pytest.fixture
async def mesh(make_mesh: MeshFactory) -> Mesh:
    return await make_mesh()


def unavailable() -> RagmeshError:
    return RagmeshError(ErrorCode.UNAVAILABLE, "model runtime unreachable (ConnectError)")
