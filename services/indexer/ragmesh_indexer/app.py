"""Composition root of the indexer: settings → adapters → application services → gRPC server."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta

from ragmesh.v1 import indexer_pb2_grpc
from ragmesh_common.rpc.server import GrpcServer
from ragmesh_common.telemetry import setup_telemetry, shutdown_telemetry
from ragmesh_common.vectorstore.port import VectorStorePort
from ragmesh_indexer import metrics
from ragmesh_indexer.build import BuildOptions, IndexBuilder
from ragmesh_indexer.checkpoints import checkpoint_from_env
from ragmesh_indexer.corpus_roots import CorpusRootPolicy
from ragmesh_indexer.domain import ChunkingConfig
from ragmesh_indexer.embedding import ChunkEmbedder, EmbeddingRuntimes
from ragmesh_indexer.inspection import CorpusInspector
from ragmesh_indexer.manifests import FileManifestStore
from ragmesh_indexer.progress import BuildTracker
from ragmesh_indexer.promotion import Promoter
from ragmesh_indexer.registry.postgres import PostgresIndexRegistry
from ragmesh_indexer.removal import CorpusRemover
from ragmesh_indexer.servicer import IndexerServicer
from ragmesh_indexer.settings import IndexerSettings
from ragmesh_indexer.validation import Validator

log = logging.getLogger("ragmesh.indexer")

# How often the active-version age gauge rereads the registry (metrics.py).
AGE_REFRESH_S = 60.0


def open_store(settings: IndexerSettings) -> VectorStorePort:
    """A Qdrant server directly when configured; else the retrieval process's VectorStore service."""
    if settings.qdrant_url:
        from qdrant_client import AsyncQdrantClient

        from ragmesh_common.vectorstore.qdrant import QdrantVectorStore

        return QdrantVectorStore(AsyncQdrantClient(url=settings.qdrant_url), settings.vector_index)
    from ragmesh_common.rpc.client import open_channel
    from ragmesh_common.vectorstore.grpc_store import GrpcVectorStore

    return GrpcVectorStore(open_channel(settings.retrieval_addr))


def build_options(settings: IndexerSettings) -> BuildOptions:
    return BuildOptions(
        chunking=ChunkingConfig(strategy=settings.chunking, max_chars=settings.chunk_max_chars,
                                min_chars=min(300, settings.chunk_max_chars),
                                max_atomic_chars=max(4000, settings.chunk_max_chars)),
        max_file_bytes=settings.max_file_bytes,
        url_base=settings.url_base,
        upsert_batch=settings.upsert_batch,
    )


async def serve(settings: IndexerSettings) -> None:
    setup_telemetry("indexer")
    # Normally a no-op; RAGMESH_INDEXER_FAULT_AT makes the process die at a named point (tests).
    checkpoint = checkpoint_from_env()
    registry = await PostgresIndexRegistry.open(settings.postgres_url, schema=settings.registry_schema)
    store = open_store(settings)
    runtimes = EmbeddingRuntimes(settings.embedding_runtimes, timeout=180)
    embedder = ChunkEmbedder(runtimes, batch=settings.embed_batch, concurrency=settings.embed_concurrency)
    manifests = FileManifestStore(settings.manifest_dir)
    roots = CorpusRootPolicy(settings.corpus_roots)
    builder = IndexBuilder(registry, store, embedder, build_options(settings), manifests=manifests,
                           checkpoint=checkpoint, tracker=BuildTracker(registry), roots=roots)
    promoter = Promoter(registry, store, retire_after=timedelta(seconds=settings.retire_after_s),
                        checkpoint=checkpoint)
    remover = CorpusRemover(registry, store, checkpoint=checkpoint)
    servicer = IndexerServicer(registry, builder, Validator(registry, store, embedder, checkpoint=checkpoint),
                               promoter, CorpusInspector(registry, manifests, max_file_bytes=settings.max_file_bytes,
                                               roots=roots), remover)
    # Before serving, repair what a dead process may have left: a half-built candidate can never
    # complete, and an alias may lag a promotion the registry committed.
    await builder.recover_interrupted()
    try:
        await promoter.reconcile_all()
        await remover.sweep()
    except Exception:  # the store may still be starting; every promote and rollback reconciles first
        log.warning("startup reconcile skipped", exc_info=True)
    # The CLI's indexer commands reach the mesh here, not through the gateway: the server spans carry
    # their request id, so `ragmesh trace <the id the CLI printed>` finds them.
    server = GrpcServer("indexer", host=settings.host, port=settings.port, metrics_port=settings.metrics_port,
                        request_id_on_spans=True)
    server.add(indexer_pb2_grpc.add_IndexerServicer_to_server, servicer, "ragmesh.v1.Indexer")
    server.install_signal_handlers()
    await server.start()
    ages = asyncio.create_task(metrics.refresh_active_ages_forever(registry, every_s=AGE_REFRESH_S))

    async def close() -> None:
        ages.cancel()
        await asyncio.gather(ages, return_exceptions=True)
        await runtimes.close()
        await store.close()
        await registry.close()
        shutdown_telemetry()

    await server.wait_and_stop(on_stop=[close])
