"""The gateway's search pipeline inside one process: the same objects the mesh runs, no gRPC between them.

Part of bench/mesh_overhead.py; see there. ``InProcessPipeline`` holds the gateway's SearchService
(injection guard included) over two in-process ports:

- ``InProcessRetrieval`` (the gateway's SearchBackend port) calls the retrieval service's domain
  HybridRetriever, built by ``RetrievalApp`` as the retrieval process builds it, over a copy of the
  vector store (the retrieval process holds the original's lock);
- ``InProcessReranker`` (the gateway's Reranker port) calls ``RerankService``, whose TeiReranker
  still asks the model runtime over HTTP, as the rerank process does.

Domain objects are converted as the gateway's upstream adapters convert protobuf
(ragmesh_gateway/clients/convert.py, retrieval.py, rerank.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import msgspec
import numpy as np

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import embedding_text

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.composition import count_degraded
from ragmesh_gateway.search.models import (
    ChunkBatch,
    Filters,
    RerankCandidate,
    RerankedIndex,
    RetrievalQuery,
    RetrievalResult,
    ScoredChunk,
)
from ragmesh_gateway.search.ports import Reranker, SearchBackend
from ragmesh_gateway.search.service import SearchOutcome, SearchParams, SearchService
from ragmesh_gateway.security.injection_guard import InjectionGuard
from ragmesh_gateway.security.metrics import count_injection_findings
from ragmesh_gateway.settings import GatewaySettings
from ragmesh_rerank.app import build_reranker
from ragmesh_rerank.fusion import Prior
from ragmesh_rerank.service import RerankQuery, RerankService
from ragmesh_rerank.settings import RerankSettings
from ragmesh_retrieval.app import RetrievalApp
from ragmesh_retrieval.domain.model import ScoredChunk as RetrievalScoredChunk
from ragmesh_retrieval.domain.model import SearchInput
from ragmesh_retrieval.settings import RetrievalSettings, load_settings


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    """``os.environ`` is ``env`` inside: settings read here what the service processes read."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def copy_store(settings: RetrievalSettings, into: Path) -> RetrievalSettings:
    """Settings over a copy of an embedded store (a store server is shared as it is). Copy it while
    no process has it open: the copy is then a consistent snapshot."""
    if settings.vector_store == "server":
        return settings
    source = Path(settings.edge_path if settings.vector_store == "edge" else settings.qdrant_path)
    if not source.is_dir():
        raise SystemExit(f"no vector store at {source}: build the index first (bench/eval_retrieval.py)")
    if (source / "lock").exists() and not _lock_is_free(source / "lock"):
        raise SystemExit(f"{source} is open in another process (a retrieval process?): stop it first")
    target = into / source.name
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("lock"))
    return msgspec.structs.replace(settings, edge_path=str(target), qdrant_path=str(target),
                                   serve_vectorstore=False)


def _lock_is_free(lock: Path) -> bool:
    """The edge store's own test (ragmesh_common.vectorstore.edge_catalog): a flock nobody holds."""
    fd = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing releases the lock if we took it
    return True


class InProcessRetrieval(SearchBackend):
    def __init__(self, app: RetrievalApp, *, timeout_s: float) -> None:
        self._retriever = app.retriever
        self._timeout_s = timeout_s  # the gateway's deadline on its retrieval call

    async def search(self, query: RetrievalQuery) -> RetrievalResult:
        f = query.filters
        try:
            async with asyncio.timeout(self._timeout_s):
                outcome = await self._retriever.search(SearchInput(
                    query=query.query, top_k=query.top_k, readable_corpora=query.readable_corpora,
                    corpora=f.corpora, library=f.library, version=f.version, tags=f.tags,
                    path_prefix=f.path_prefix, include_content=query.include_content,
                ))
        except TimeoutError:
            raise RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "retrieval timed out") from None
        return RetrievalResult(
            results=[scored_chunk(r) for r in outcome.results],
            query_mode=outcome.query_mode,
            index_versions=list(outcome.index_versions),
            degraded=list(outcome.degraded),
            filtered_by_threshold=outcome.filtered_by_threshold,
            hint=outcome.hint,
            top_k_truncated=outcome.top_k_truncated,
            skipped_libraries=list(outcome.skipped_libraries),
        )

    async def batch_get(self, chunk_ids: list[str], *, index_version: str, readable_corpora: tuple[str, ...],
                        include_content: bool) -> ChunkBatch:
        raise NotImplementedError("the bench only searches")


def scored_chunk(result: RetrievalScoredChunk) -> ScoredChunk:
    # Retrieval and the gateway hold the same record (ragmesh_common.chunk_record.Chunk).
    # Scores cross the wire as protobuf ``map<string, float>``: the gateway sees float32. The same
    # rounding here gives the reranker the same priors, hence the same order, in both paths.
    scores = {name: float(np.float32(value)) for name, value in result.scores.items()}
    return ScoredChunk(chunk=result.chunk, scores=scores)


class InProcessReranker(Reranker):
    def __init__(self, service: RerankService, *, timeout_s: float) -> None:
        self._service = service
        self._timeout_s = timeout_s  # the gateway's deadline on its rerank call

    async def rerank(self, query: str, candidates: list[RerankCandidate]) -> list[RerankedIndex]:
        request = RerankQuery(query, [c.text for c in candidates], 0,
                              [Prior(dense=c.dense, sparse=c.sparse) for c in candidates])
        try:
            async with asyncio.timeout(self._timeout_s):
                outcome = await self._service.rerank(request, time_remaining=self._timeout_s)
        except TimeoutError:
            raise RagmeshError(ErrorCode.DEADLINE_EXCEEDED, "rerank timed out") from None
        return [RerankedIndex(index=r.index, score=r.score) for r in outcome.results]


class InProcessPipeline:
    """Settings read from ``env`` (what the mesh's processes get); the store is a copy under ``work``."""

    def __init__(self, env: dict[str, str], work: Path) -> None:
        with environment(env):
            self.gateway_settings = GatewaySettings.from_env()
            self.rerank_settings = RerankSettings.from_env()
            self.retrieval_settings = copy_store(load_settings(), work)
        self.retrieval: RetrievalApp | None = None
        self.reranker = None
        self.search_service: SearchService | None = None
        self.caller = Caller(principal="local")

    async def open(self) -> None:
        """Built inside the event loop that will run the searches (clients bind to it)."""
        gateway = self.gateway_settings
        self.retrieval = RetrievalApp(self.retrieval_settings)
        self.reranker = build_reranker(self.rerank_settings)
        self.search_service = SearchService(
            InProcessRetrieval(self.retrieval, timeout_s=gateway.search_timeout_s),
            InProcessReranker(RerankService(self.reranker, self.rerank_settings),
                              timeout_s=gateway.rerank_timeout_s),
            InjectionGuard(on_findings=count_injection_findings),
            candidates=gateway.search_candidates,
            on_degraded=count_degraded,
        )
        # AuthDisabled's caller: every corpus with an active index (the gateway asks retrieval every 2 s).
        corpora = await self.retrieval.directory.list_corpora([], all_corpora=True)
        self.caller = Caller(principal="local", readable_corpora=frozenset(c.corpus for c in corpora))

    async def search(self, query: str, top_k: int, corpus: str) -> SearchOutcome:
        assert self.search_service is not None, "open() first"
        params = SearchParams(query=query, top_k=top_k, filters=Filters(corpora=(corpus,)))
        return await self.search_service.search(params, self.caller)

    async def chunk_texts(self) -> list[str]:
        """What the indexer embedded for every point of the store copy (index_schema.embedding_text)."""
        assert self.retrieval is not None, "open() first"
        store = self.retrieval.store
        texts: list[str] = []
        for collection in sorted(set((await store.get_aliases()).values())):
            offset = None
            while True:
                points, offset = await store.scroll(collection, offset=offset, limit=512)
                texts.extend(embedding_text(p.payload.get("title", ""), p.payload.get("heading_path", []),
                                            p.payload.get("quote", "")) for p in points)
                if offset is None:
                    break
        return texts

    async def index_stats(self, corpus: str) -> dict:
        assert self.retrieval is not None, "open() first"
        stats = await self.retrieval.directory.stats([corpus])
        return {"points": stats.points, "documents": stats.documents, "store": stats.store,
                "embedding_model": stats.embedding_model}

    async def close(self) -> None:
        if self.reranker is not None:
            await self.reranker.close()
        if self.retrieval is not None:
            await self.retrieval.close()
