"""Reads that are not searches: chunks by id pinned to an index version, corpus listing, totals."""

from __future__ import annotations

import asyncio
from collections import Counter

from ragmesh_common.embedders.compatibility import decide, index_embedder
from ragmesh_common.embedders.identity import EmbedderIdentity
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import CollectionMeta, collection_name, index_version_of
from ragmesh_common.vectorstore.port import HybridQuery, PointFilter, VectorStorePort, normalize_path_prefix

from ragmesh_retrieval.domain.catalog import CorpusCatalog
from ragmesh_retrieval.domain.chunks import chunk_from_payload
from ragmesh_retrieval.domain.embedding import Embedder
from ragmesh_retrieval.domain.model import Chunk, ChunkBatch, CorpusSummary, SourceHit, StoreStats
from ragmesh_retrieval.domain.validation import validated_chunk_ids, validated_index_version


MAX_SOURCE_PATH_CHARS = 1024
# /info is cached by the TEI client after its first answer; a runtime that hangs before that must not
# hold up the corpus list (the gateway's readiness waits 2 s for it).
IDENTITY_TIMEOUT_S = 1.0


class CorpusDirectory:
    def __init__(self, store: VectorStorePort, catalog: CorpusCatalog, embedder: Embedder | None = None) -> None:
        self.store = store
        self.catalog = catalog
        self.embedder = embedder

    async def _serving(self) -> tuple[EmbedderIdentity | None, str]:
        """The embedder serving queries now, or why it is not known."""
        if self.embedder is None:
            return None, ""
        try:
            async with asyncio.timeout(IDENTITY_TIMEOUT_S):
                return await self.embedder.identity(), ""
        except (RagmeshError, TimeoutError) as exc:
            code = exc.code.value if isinstance(exc, RagmeshError) else ErrorCode.DEADLINE_EXCEEDED.value
            return None, f"the embedding runtime did not answer ({code}); whether this index is searched by " \
                         "vector is not known"

    @staticmethod
    def _search_state(meta: CollectionMeta, serving: EmbedderIdentity | None, unknown: str) -> tuple[str, str]:
        if serving is None:
            return ("unknown", unknown) if unknown else ("", "")
        recorded, legacy = index_embedder(meta)
        verdict = decide(recorded, serving, query_dimension=serving.dimension, legacy=legacy)
        return ("hybrid", "") if verdict.accepted else ("keyword_only", verdict.reason)

    async def batch_get(
        self, chunk_ids: list[str], index_version: str, readable_corpora: list[str], include_content: bool
    ) -> ChunkBatch:
        """Chunks from exactly ``index_version`` (a version or a full collection name); empty means the
        active versions. A version no readable corpus has (retired, unknown, or unreadable) is
        INDEX_VERSION_GONE: never a silent switch to the active index."""
        ids = validated_chunk_ids(chunk_ids)
        version = validated_index_version(index_version)
        if "__" in version:
            version = index_version_of(version)
        if not ids:
            return ChunkBatch(chunks=[], missing=[])
        readable = set(readable_corpora)
        collections = await self._collections(version, readable)
        if not collections:
            if version:
                raise RagmeshError(ErrorCode.INDEX_VERSION_GONE, "that index version is not available",
                                   {"index_version": version})
            return ChunkBatch(chunks=[], missing=list(ids))
        pages = await asyncio.gather(*(self.store.scroll(c, ids=ids) for c in collections))
        found: dict[str, Chunk] = {}
        for collection, (points, _) in zip(collections, pages):
            for point in points:
                if point.id in found or point.payload.get("corpus") not in readable:
                    continue
                chunk = chunk_from_payload(point.payload, collection, include_content=include_content)
                if chunk is not None:
                    found[point.id] = chunk
        return ChunkBatch(chunks=[found[i] for i in ids if i in found], missing=[i for i in ids if i not in found])

    async def _collections(self, version: str, readable: set[str]) -> list[str]:
        if not version:
            return [c.collection for c in await self.catalog.readable(readable)]
        existing = set(await self.store.list_collections())
        # The ids' corpus is unknown: every readable corpus's collection of that version is a candidate.
        return sorted({collection_name(c, version) for c in readable} & existing)

    async def list_corpora(self, readable_corpora: list[str], *, all_corpora: bool = False) -> list[CorpusSummary]:
        active = list((await self.catalog.active()).values()) if all_corpora else \
            await self.catalog.readable(readable_corpora)
        counts = await asyncio.gather(*(self.store.count(c.collection) for c in active), return_exceptions=True)
        serving, unknown = await self._serving() if active else (None, "")
        summaries = []
        for entry, count in zip(active, counts):
            if isinstance(count, RagmeshError) and count.code == ErrorCode.NOT_FOUND:
                continue  # swapped away and dropped since the catalog was read
            if isinstance(count, BaseException):
                raise count
            corpus = entry.meta.corpus
            search, reason = self._search_state(entry.meta, serving, unknown)
            summaries.append(CorpusSummary(
                corpus=entry.corpus, library=corpus.library, version=corpus.version,
                visibility=corpus.visibility, active_index_version=entry.index_version,
                points=count, documents=entry.meta.documents, state="active" if count else "empty",
                license=corpus.license, source_url=corpus.source_url, root=corpus.root,
                embedder=index_embedder(entry.meta)[0].label, search=search, keyword_only_reason=reason,
            ))
        return summaries

    async def has_source(self, corpus: str, source_path: str, readable_corpora: list[str]) -> SourceHit:
        """Whether ``corpus``'s active index holds a chunk of ``source_path``.

        One filtered query for a single point: the corpus (the ACL) and the path are payload filters,
        and the probe vector only has to be a valid one, since any match will do. Files the indexer
        skipped (excluded, ``index: false``, dot-files) have no chunks, so they are never found.
        """
        path = normalize_path_prefix(source_path)
        if not path or len(path) > MAX_SOURCE_PATH_CHARS or corpus not in set(readable_corpora):
            return SourceHit(found=False)
        target = (await self.catalog.active()).get(corpus)
        if target is None or target.meta.vector_size <= 0:
            return SourceHit(found=False)
        probe = [1.0] + [0.0] * (target.meta.vector_size - 1)
        try:
            hits = await self.store.hybrid_query(HybridQuery(
                collection=target.collection,
                # path_prefix matches the file and anything below a folder of that name; the
                # payload check below keeps the file itself only.
                filter=PointFilter(corpora=(corpus,), path_prefix=path),
                limit=8, dense=probe, candidates=8,
            ))
        except RagmeshError as exc:
            if exc.code == ErrorCode.NOT_FOUND:  # swapped away since the catalog was read
                return SourceHit(found=False)
            raise
        if any(normalize_path_prefix(str(h.payload.get("source_path", ""))) == path for h in hits):
            return SourceHit(found=True, index_version=target.index_version)
        return SourceHit(found=False)

    async def stats(self, readable_corpora: list[str]) -> StoreStats:
        summaries = await self.list_corpora(readable_corpora)
        listed = {s.corpus for s in summaries}
        metas = [c.meta for c in await self.catalog.readable(readable_corpora) if c.corpus in listed]
        return StoreStats(
            corpora=len(summaries),
            points=sum(s.points for s in summaries),
            documents=sum(s.documents for s in summaries),
            embedding_model=_most_common(m.embedding_model for m in metas),
            vector_size=int(_most_common(m.vector_size for m in metas) or 0),
            lexical_tokenizer=_most_common(m.lexical_version for m in metas),
            store=self.store.kind,
        )


def _most_common(values) -> str | int:  # type: ignore[no-untyped-def]
    counted = Counter(values).most_common(1)
    return counted[0][0] if counted else ""
