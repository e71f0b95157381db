"""Building a candidate index version: scan → parse → chunk → embed → write a new collection.

A build never touches what the alias serves: it writes a brand-new collection, and only promotion
moves the alias. Builds are idempotent by (content hash, config hash), and incremental: a chunk id
is derived from its content, so a chunk found with the same id in the active collection (same
embedding model) reuses its stored vector instead of being embedded again.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Awaitable, Callable

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import (
    ChunkPayload,
    CollectionMeta,
    CorpusMeta,
    alias_name,
    collection_name,
)
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.vectorstore.port import SparseVector, StoredPoint, VectorStorePort
from ragmesh_indexer.domain import (
    Article,
    ChunkingConfig,
    ScanConfig,
    ScanResult,
    UrlScheme,
    chunk_document,
    require_all_indexable,
    scan_corpus,
)
from ragmesh_indexer.embedding import ChunkEmbedder
from ragmesh_indexer.registry import BuildStats, CorpusSpec, IndexRegistry

log = logging.getLogger("ragmesh.indexer.build")

UPSERT_BATCH = 256
# Called at each checkpoint with the stage name; tests use it to kill a build at a chosen point.
Checkpoint = Callable[[str], Awaitable[None]]


@dataclass
class BuildOutcome:
    index_version: str
    reused_existing: bool
    documents: int
    chunks: int
    embedded: int
    reused_vectors: int
    state: str
    scan: ScanResult | None = None
    files: list = field(default_factory=list)


@dataclass
class BuildOptions:
    chunking: ChunkingConfig
    max_file_bytes: int
    url_base: str


async def _no_checkpoint(stage: str) -> None:
    return None


class IndexBuilder:
    def __init__(self, registry: IndexRegistry, store: VectorStorePort, embedder: ChunkEmbedder,
                 options: BuildOptions, *, checkpoint: Checkpoint = _no_checkpoint) -> None:
        self.registry = registry
        self.store = store
        self.embedder = embedder
        self.options = options
        self.checkpoint = checkpoint
        self.lexical = LexicalEncoder()

    async def build(self, spec: CorpusSpec, *, force: bool, actor: str, reason: str) -> BuildOutcome:
        spec = await self._resolve_spec(spec)
        root = Path(spec.root)
        scan = await asyncio.to_thread(
            scan_corpus, root,
            ScanConfig(include=list(spec.include) or ["**"], exclude=list(spec.exclude),
                       max_file_bytes=self.options.max_file_bytes),
        )
        await self.checkpoint("scanned")
        files = scan.manifest.entries
        require_all_indexable(scan)
        chunking = self._chunking(spec)
        urls = UrlScheme(base=spec.url_base or self.options.url_base)
        articles = await asyncio.to_thread(
            lambda: [chunk_document(doc, corpus=spec.id, config=chunking, urls=urls) for doc in scan.documents]
        )
        await self.checkpoint("chunked")
        chunks = [c for a in articles for c in a.chunks]
        if not chunks:
            raise RagmeshError(ErrorCode.BUILD_FAILED, f"corpus {spec.id} yielded no chunks",
                               {"files": len(files)})
        model_id = await self.embedder.model_id()
        config_hash = self._config_hash(spec, chunking, model_id)
        content_hash = scan.manifest.corpus_sha256
        if not force:
            existing = await self.registry.find_by_hashes(spec.id, content_hash, config_hash)
            if existing is not None and (await self.store.get_collection(existing.collection)).exists:
                return BuildOutcome(existing.index_version, True, existing.stats.documents, existing.stats.chunks,
                                    0, 0, existing.state.value, scan, files)

        index_version = _new_version(config_hash)
        collection = collection_name(spec.id, index_version)
        await self.registry.create_candidate(
            spec.id, index_version, content_hash=content_hash, config_hash=config_hash,
            collection=collection, actor=actor, reason=reason,
        )
        try:
            outcome = await self._write(spec, articles, index_version, collection, model_id, scan)
        except BaseException as exc:
            # A killed or failed build leaves a failed candidate; its collection may be partial,
            # but no alias points at it and retirement deletes it later.
            if not isinstance(exc, (asyncio.CancelledError, KeyboardInterrupt)):
                await self.registry.mark_failed(spec.id, index_version, {"error": _safe(exc)},
                                                actor=actor, reason="build failed")
            raise
        outcome.files = files
        return outcome

    async def _write(self, spec: CorpusSpec, articles: list[Article], index_version: str, collection: str,
                     model_id: str, scan: ScanResult) -> BuildOutcome:
        chunks = [(a, c) for a in articles for c in a.chunks]
        parents = {p.parent_id: p for a in articles for p in a.parents}
        total = len(chunks)
        reused = await self._reusable_vectors(spec.id, model_id, [c.chunk_id for _, c in chunks])
        await self.checkpoint("reuse-resolved")
        todo = [(a, c) for a, c in chunks if c.chunk_id not in reused]

        async def progress(done: int) -> None:
            await self.registry.set_progress(spec.id, index_version, stage="embed", done=done, total=len(todo))

        started = time.perf_counter()
        vectors = await self.embedder.embed([embedding_text(a, c) for a, c in todo], progress)
        await self.checkpoint("embedded")
        dense = dict(reused)
        dense.update({c.chunk_id: v for (_, c), v in zip(todo, vectors)})
        sparse, avg_len = await asyncio.to_thread(self.lexical.encode_documents, [lexical_text(a, c) for a, c in chunks])
        dim = len(next(iter(dense.values())))
        meta = CollectionMeta(
            index_version=index_version,
            corpus=CorpusMeta(corpus=spec.id, library=spec.library, version=spec.version,
                              visibility=spec.visibility, license=spec.license, source_url=spec.source_url,
                              root=spec.root),
            embedding_model=model_id, vector_size=dim, lexical_version=self.lexical.version,
            lexical_config=self.lexical.config_dict(), avg_len=avg_len,
            documents=len(articles), chunks=total,
        )
        await self.store.create_collection(collection, dim, meta)
        await self.checkpoint("collection-created")
        for start in range(0, total, UPSERT_BATCH):
            batch = chunks[start:start + UPSERT_BATCH]
            points = [
                StoredPoint(id=c.chunk_id, payload=payload_for(spec, a, c, parents.get(c.parent_id)),
                            dense=dense[c.chunk_id], sparse=SparseVector(s.indices, s.values))
                for (a, c), s in zip(batch, sparse[start:start + UPSERT_BATCH])
            ]
            await self.store.upsert(collection, points)
            await self.registry.set_progress(spec.id, index_version, stage="upsert",
                                             done=min(start + UPSERT_BATCH, total), total=total)
            await self.checkpoint("upserted-batch")
        stats = BuildStats(documents=len(articles), chunks=total, embedded=len(todo), reused=len(reused))
        await self.registry.set_stats(spec.id, index_version, stats)
        log.info("built", extra={"fields": {"corpus": spec.id, "index_version": index_version, "chunks": total,
                                             "embedded": len(todo), "reused": len(reused),
                                             "seconds": round(time.perf_counter() - started, 2)}})
        return BuildOutcome(index_version, False, len(articles), total, len(todo), len(reused), "candidate", scan)

    async def _resolve_spec(self, spec: CorpusSpec) -> CorpusSpec:
        if not spec.root:
            try:
                known = await self.registry.get_corpus(spec.id)
            except RagmeshError:
                raise RagmeshError(ErrorCode.INVALID_ARGUMENT,
                                   f"corpus {spec.id} is unknown; give its source folder") from None
            spec = CorpusSpec(**{f: getattr(known, f) for f in CorpusSpec.__struct_fields__})
        root = Path(spec.root)
        if not root.is_dir():
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"corpus root for {spec.id} is not a folder")
        await self.registry.upsert_corpus(spec)
        return spec

    def _chunking(self, spec: CorpusSpec) -> ChunkingConfig:
        if spec.chunking and spec.chunking != self.options.chunking.strategy:
            import msgspec

            return msgspec.structs.replace(self.options.chunking, strategy=spec.chunking)
        return self.options.chunking

    def _config_hash(self, spec: CorpusSpec, chunking: ChunkingConfig, model_id: str) -> str:
        config = {
            "chunking": chunking.fingerprint, "model": model_id, "lexical": self.lexical.version,
            "url_base": spec.url_base or self.options.url_base, "library": spec.library, "version": spec.version,
            "visibility": spec.visibility, "license": spec.license, "source_url": spec.source_url,
            "schema": 1,
        }
        return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()

    async def _reusable_vectors(self, corpus: str, model_id: str, ids: list[str]) -> dict[str, list[float]]:
        """Vectors of unchanged chunks, read from the collection the alias serves now."""
        active = await self.store.get_collection(alias_name(corpus))
        if not active.exists or active.metadata is None or active.metadata.embedding_model != model_id:
            return {}
        source = collection_name(corpus, active.metadata.index_version)
        found: dict[str, list[float]] = {}
        for start in range(0, len(ids), UPSERT_BATCH):
            points, _ = await self.store.scroll(source, ids=ids[start:start + UPSERT_BATCH], with_vectors=True,
                                                limit=UPSERT_BATCH)
            found.update({p.id: p.dense for p in points if p.dense})
        return found


def embedding_text(article: Article, chunk) -> str:
    """The chunk as the embedder sees it: its title and heading path give it context."""
    context = " > ".join([t for t in [article.title, *chunk.heading_path] if t])
    return f"{context}\n{chunk.text}" if context and context not in chunk.text[: len(context) + 4] else chunk.text


def lexical_text(article: Article, chunk) -> str:
    return f"{article.title}\n{chunk.text}" if article.title else chunk.text


def payload_for(spec: CorpusSpec, article: Article, chunk, parent) -> dict:
    payload = ChunkPayload(
        chunk_id=chunk.chunk_id, parent_id=chunk.parent_id, doc_id=chunk.doc_id, corpus=spec.id,
        library=spec.library, version=spec.version, title=chunk.title or article.title,
        heading_path=list(chunk.heading_path), url=chunk.url, quote=chunk.text, source_path=chunk.path,
        line_start=chunk.line_start, line_end=chunk.line_end, page=chunk.page,
        parent_content=parent.text if parent is not None else "", tags=list(chunk.tags),
        download_path=f"/api/rag/v1/files/{spec.id}/{chunk.path}", content_sha256=chunk.content_sha256,
        strategy=chunk.strategy,
    )
    import msgspec

    return msgspec.to_builtins(payload)


def _new_version(config_hash: str) -> str:
    now = datetime.now(timezone.utc)
    return f"v{now:%Y%m%d%H%M%S}{now.microsecond // 1000:03d}-{config_hash[:6]}"


def _safe(exc: BaseException) -> str:
    if isinstance(exc, RagmeshError):
        return f"{exc.code.value}: {exc.message}"
    return type(exc).__name__
