"""Writing one candidate collection: reuse unchanged vectors, embed the rest, BM25-encode, upsert.

The three overlap. BM25 encoding runs on a worker thread while the first batches are embedded;
points are upserted as soon as their vectors arrive, while later batches are still with the
runtime. Embedding is the slow part by far (bench/index_throughput.py), so the build takes about
as long as embedding its new chunks alone.
"""

from __future__ import annotations

import asyncio
import logging
import time

import msgspec

from ragmesh_common.embedders.compatibility import index_embedder
from ragmesh_common.embedders.identity import EmbedderIdentity
from ragmesh_common.index_schema import (
    ChunkPayload,
    CollectionMeta,
    CorpusMeta,
    alias_name,
    collection_name,
)
from ragmesh_common.index_schema import embedding_text as chunk_embedding_text
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.vectorstore.port import SparseVector, StoredPoint, VectorStorePort
from ragmesh_indexer import metrics
from ragmesh_indexer.checkpoints import Checkpoint, no_checkpoint
from ragmesh_indexer.domain import Article, Chunk
from ragmesh_indexer.embedding import ChunkEmbedder
from ragmesh_indexer.progress import BuildTracker
from ragmesh_indexer.registry import BuildStats, CorpusSpec

log = logging.getLogger("ragmesh.indexer.build")

# A positioned vector: (index into the build's chunk list, dense vector).
_Ready = list[tuple[int, list[float]]]


class CollectionWriter:
    def __init__(self, store: VectorStorePort, embedder: ChunkEmbedder, lexical: LexicalEncoder, *,
                 tracker: BuildTracker, checkpoint: Checkpoint = no_checkpoint, upsert_batch: int = 256) -> None:
        self.store = store
        self.embedder = embedder
        self.lexical = lexical
        self.tracker = tracker
        self.checkpoint = checkpoint
        self.upsert_batch = max(1, upsert_batch)

    async def write(self, spec: CorpusSpec, articles: list[Article], index_version: str, collection: str,
                    model_id: str, embedder: EmbedderIdentity) -> BuildStats:
        chunks = [(a, c) for a in articles for c in a.chunks]
        parents = {p.parent_id: p for a in articles for p in a.parents}
        reused = await self.reusable_vectors(spec.id, model_id, embedder, [c.chunk_id for _, c in chunks])
        await self.checkpoint("reuse-resolved")
        todo = [i for i, (_, c) in enumerate(chunks) if c.chunk_id not in reused]
        await self.tracker.report(spec.id, index_version, "embed", 0, len(todo))
        started = time.perf_counter()
        sparse_job = asyncio.create_task(asyncio.to_thread(
            self.lexical.encode_documents, [lexical_text(a, c) for a, c in chunks]))
        ready: asyncio.Queue[_Ready | None] = asyncio.Queue()
        if reused:
            ready.put_nowait([(i, reused[c.chunk_id]) for i, (_, c) in enumerate(chunks) if c.chunk_id in reused])

        async def on_batch(start: int, vectors: list[list[float]]) -> None:
            metrics.count_embedded(spec.id, len(vectors))  # as they arrive: a failed build embedded them too
            ready.put_nowait(list(zip(todo[start:start + len(vectors)], vectors)))
            await self.checkpoint("embed-batch")

        async def progress(done: int) -> None:
            await self.tracker.report(spec.id, index_version, "embed", done, len(todo))

        async def embed_all() -> None:
            try:
                await self.embedder.embed([embedding_text(*chunks[i]) for i in todo], progress, on_batch=on_batch)
                await self.checkpoint("embedded")
            finally:
                ready.put_nowait(None)  # wakes the writer whether embedding finished or failed

        embedding = asyncio.create_task(embed_all())
        written = 0
        pending: _Ready = []
        sparse: list | None = None
        try:
            while (item := await ready.get()) is not None:
                pending.extend(item)
                if sparse is None:
                    sparse, avg_len = await sparse_job
                    dim = len(pending[0][1])
                    await self.store.create_collection(collection, dim, self._meta(
                        spec, index_version, model_id, embedder.with_dimension(dim), avg_len, len(articles),
                        len(chunks)))
                    await self.checkpoint("collection-created")
                while len(pending) >= self.upsert_batch:
                    written += await self._upsert(spec, collection, chunks, parents, sparse, pending[:self.upsert_batch])
                    pending = pending[self.upsert_batch:]
                    if embedding.done():  # while embedding runs, its progress is the one worth showing
                        await self.tracker.report(spec.id, index_version, "upsert", written, len(chunks))
            await embedding  # raises what embedding raised
            if pending and sparse is not None:
                written += await self._upsert(spec, collection, chunks, parents, sparse, pending)
                await self.tracker.report(spec.id, index_version, "upsert", written, len(chunks))
        finally:
            for job in (embedding, sparse_job):
                if not job.done():
                    job.cancel()
            await asyncio.gather(embedding, sparse_job, return_exceptions=True)
        log.info("collection written", extra={"fields": {
            "corpus": spec.id, "index_version": index_version, "chunks": len(chunks), "embedded": len(todo),
            "reused": len(reused), "seconds": round(time.perf_counter() - started, 2)}})
        return BuildStats(documents=len(articles), chunks=len(chunks), embedded=len(todo), reused=len(reused))

    async def _upsert(self, spec: CorpusSpec, collection: str, chunks: list[tuple[Article, Chunk]],
                      parents: dict, sparse: list, batch: _Ready) -> int:
        points = [stored_point(spec, *chunks[i], parents.get(chunks[i][1].parent_id), vector, sparse[i])
                  for i, vector in batch]
        await self.store.upsert(collection, points)
        await self.checkpoint("upserted-batch")
        return len(points)

    def _meta(self, spec: CorpusSpec, index_version: str, model_id: str, embedder: EmbedderIdentity,
              avg_len: float, documents: int, chunks: int) -> CollectionMeta:
        return collection_meta(spec, index_version, model_id, embedder, self.lexical, avg_len, documents, chunks)

    async def reusable_vectors(self, corpus: str, model_id: str, embedder: EmbedderIdentity,
                               ids: list[str]) -> dict[str, list[float]]:
        """Vectors of unchanged chunks, read from the collection the alias serves now, when the same
        embedder made them (a compatible one is not enough: one index holds one embedder's vectors)."""
        active = await self.store.get_collection(alias_name(corpus))
        if not active.exists or active.metadata is None:
            return {}
        recorded, legacy = index_embedder(active.metadata)
        if not (active.metadata.embedding_model == model_id if legacy else recorded.same_embedder(embedder)):
            return {}
        source = collection_name(corpus, active.metadata.index_version)
        found: dict[str, list[float]] = {}
        page = 256
        for start in range(0, len(ids), page):
            points, _ = await self.store.scroll(source, ids=ids[start:start + page], with_vectors=True, limit=page)
            found.update({p.id: p.dense for p in points if p.dense})
        return found


def collection_meta(spec: CorpusSpec, index_version: str, model_id: str, embedder: EmbedderIdentity,
                    lexical: LexicalEncoder, avg_len: float, documents: int, chunks: int) -> CollectionMeta:
    return CollectionMeta(
        index_version=index_version,
        corpus=CorpusMeta(corpus=spec.id, library=spec.library, version=spec.version,
                          visibility=spec.visibility, license=spec.license, source_url=spec.source_url,
                          root=spec.root),
        embedding_model=model_id, vector_size=embedder.dimension, lexical_version=lexical.version,
        lexical_config=lexical.config_dict(), avg_len=avg_len, documents=documents, chunks=chunks,
        embedder=embedder,
    )


def stored_point(spec: CorpusSpec, article: Article, chunk: Chunk, parent, dense: list[float],
                 sparse) -> StoredPoint:
    """One chunk as the store keeps it: its payload, dense vector and BM25 vector."""
    return StoredPoint(id=chunk.chunk_id, payload=payload_for(spec, article, chunk, parent), dense=dense,
                       sparse=SparseVector(sparse.indices, sparse.values))


def embedding_text(article: Article, chunk: Chunk) -> str:
    """The chunk as the embedder sees it (ragmesh_common.index_schema.embedding_text)."""
    return chunk_embedding_text(article.title, chunk.heading_path, chunk.text)


def lexical_text(article: Article, chunk: Chunk) -> str:
    return f"{article.title}\n{chunk.text}" if article.title else chunk.text


def payload_for(spec: CorpusSpec, article: Article, chunk: Chunk, parent) -> dict:
    payload = ChunkPayload(
        chunk_id=chunk.chunk_id, parent_id=chunk.parent_id, doc_id=chunk.doc_id, corpus=spec.id,
        library=spec.library, version=spec.version, title=chunk.title or article.title,
        heading_path=list(chunk.heading_path), url=chunk.url, quote=chunk.text, source_path=chunk.path,
        line_start=chunk.line_start, line_end=chunk.line_end, page=chunk.page,
        parent_content=parent.text if parent is not None else "", tags=list(chunk.tags),
        download_path=f"/api/rag/v1/files/{spec.id}/{chunk.path}", content_sha256=chunk.content_sha256,
        strategy=chunk.strategy,
    )
    return msgspec.to_builtins(payload)
