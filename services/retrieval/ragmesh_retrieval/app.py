"""Composition root: settings -> adapters -> application services -> one gRPC server.

The server carries ``ragmesh.v1.Retrieval`` and, with an embedded store, ``ragmesh.v1.VectorStore``
(this process owns the storage — Qdrant Edge by default, or qdrant-client's local mode — so the
indexer writes through it).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from ragmesh.v1 import retrieval_pb2_grpc, vectorstore_pb2_grpc

from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.errors import RagmeshError
from ragmesh_common.heap import freeze_startup_objects
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.rpc.server import GrpcServer
from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry
from ragmesh_common.vectorstore.port import VectorStorePort

from ragmesh_retrieval import metrics
from ragmesh_retrieval.adapters.tei_embedder import TeiEmbedder
from ragmesh_retrieval.domain.catalog import CorpusCatalog
from ragmesh_retrieval.domain.embedding import CachedEmbedder, Embedder
from ragmesh_retrieval.domain.lexical import QueryEncoders
from ragmesh_retrieval.domain.reads import CorpusDirectory
from ragmesh_retrieval.domain.search import HybridRetriever
from ragmesh_retrieval.servicer import RetrievalServicer
from ragmesh_retrieval.settings import RetrievalSettings, get_settings
from ragmesh_retrieval.vectorstore_servicer import VectorStoreServicer

log = logging.getLogger("ragmesh.retrieval")


def open_store(settings: RetrievalSettings) -> VectorStorePort:
    """The adapter RAGMESH_VECTOR_STORE names; only the chosen one's client library is imported."""
    if settings.vector_store == "server":
        from qdrant_client import AsyncQdrantClient

        from ragmesh_common.vectorstore.qdrant import QdrantVectorStore

        return QdrantVectorStore(AsyncQdrantClient(url=settings.qdrant_url, api_key=settings.qdrant_api_key or None),
                                 settings.vector_index)
    busy = ("(only one process may open it; stop that one, or set RAGMESH_VECTOR_STORE=server and "
            "RAGMESH_QDRANT_URL)")
    if settings.vector_store == "edge":
        from ragmesh_common.vectorstore.edge import EdgeVectorStore

        try:
            return EdgeVectorStore(settings.edge_path, settings.vector_index)
        except RagmeshError as exc:  # locked by another process, or an unreadable catalog
            hint = f" {busy}" if "another process" in exc.message else ""
            raise SystemExit(f"ragmesh-retrieval: {exc.message}{hint}") from exc
    from qdrant_client import QdrantClient

    from ragmesh_common.vectorstore.qdrant import QdrantVectorStore

    Path(settings.qdrant_path).mkdir(parents=True, exist_ok=True)
    try:
        client = QdrantClient(path=settings.qdrant_path)
    except RuntimeError as exc:  # portalocker: another process holds the storage
        raise SystemExit(
            f"ragmesh-retrieval: the local Qdrant storage {settings.qdrant_path} is open in another process {busy}"
        ) from exc
    return QdrantVectorStore(client)


class RetrievalApp:
    """Everything one retrieval process runs; adapters may be passed in (tests pass real ones)."""

    def __init__(
        self,
        settings: RetrievalSettings,
        *,
        store: VectorStorePort | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings
        self.store = store or open_store(settings)
        tei = None if embedder is not None else TeiClient(settings.embed_url)
        self.embedder = CachedEmbedder(
            embedder or TeiEmbedder(tei, timeout=settings.limits.embed_timeout_s),
            max_entries=settings.embed_cache_entries,
        )
        self.catalog = CorpusCatalog(self.store, ttl_s=settings.catalog_ttl_s,
                                     on_refresh=metrics.publish_active_indexes)
        self.retriever = HybridRetriever(self.store, self.catalog, self.embedder, QueryEncoders(), settings.limits)
        self.directory = CorpusDirectory(self.store, self.catalog, self.embedder)
        self.server = GrpcServer("retrieval", host=settings.host, port=settings.port,
                                 metrics_port=settings.metrics_port)
        if tei is not None:
            self.server.watch_model("embedding", lambda: tei.health(timeout=1.0))
        self.server.add(retrieval_pb2_grpc.add_RetrievalServicer_to_server,
                        RetrievalServicer(self.retriever, self.directory), "ragmesh.v1.Retrieval")
        if settings.serve_vectorstore:
            self.server.add(vectorstore_pb2_grpc.add_VectorStoreServicer_to_server,
                            VectorStoreServicer(self.store, self.catalog), "ragmesh.v1.VectorStore")

    async def start(self) -> int:
        # jieba loads its dictionary on first use (~1 s): pay it now, not in the first search.
        await asyncio.to_thread(LexicalEncoder().encode_query, "warm up 预热")
        port = await self.server.start()
        log.info("retrieval ready", extra={"fields": {"store": self.store.kind, "port": port,
                                                      "vectorstore_served": self.settings.serve_vectorstore}})
        return port

    async def stop(self, grace: float = 2.0) -> None:
        await self.server.server.stop(grace)
        await self.close()

    async def close(self) -> None:
        await self.embedder.close()
        await self.store.close()


async def serve(settings: RetrievalSettings | None = None) -> None:
    settings = settings or get_settings()
    setup_telemetry("retrieval")
    log.info("starting", extra={"fields": settings.loggable()})
    app = RetrievalApp(settings)
    await app.start()
    # After start, not before: the store, its catalog and the lexical encoders are made there.
    freeze_startup_objects()
    app.server.install_signal_handlers()
    try:
        await app.server.wait_and_stop(on_stop=[app.close])
    finally:
        shutdown_telemetry()
