"""Composition root of the rerank service: settings -> TEI client -> use case -> gRPC server."""

from __future__ import annotations

import logging

from ragmesh.v1 import rerank_pb2_grpc
from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.rpc.server import GrpcServer
from ragmesh_common.settings import describe

from ragmesh_rerank.ports import Reranker
from ragmesh_rerank.service import RerankService
from ragmesh_rerank.servicer import RerankServicer
from ragmesh_rerank.settings import RerankSettings
from ragmesh_rerank.tei_reranker import TeiReranker

log = logging.getLogger("ragmesh.rerank")


def build_reranker(settings: RerankSettings, client: TeiClient | None = None) -> Reranker:
    client = client or TeiClient(settings.rerank_url, timeout=settings.runtime_timeout_s)
    return TeiReranker(client, batch_size=settings.batch_size)


def build_server(settings: RerankSettings, reranker: Reranker | None = None) -> tuple[GrpcServer, Reranker]:
    """The server with its servicer registered, not started. Tests pass their own reranker."""
    server = GrpcServer("rerank", host=settings.host, port=settings.port,
                        metrics_port=settings.metrics_port or None)
    if reranker is None:
        client = TeiClient(settings.rerank_url, timeout=settings.runtime_timeout_s)
        reranker = build_reranker(settings, client)
        server.watch_model("rerank", lambda: client.health(timeout=1.0))
    server.add(rerank_pb2_grpc.add_RerankServicer_to_server,
               RerankServicer(RerankService(reranker, settings)), "ragmesh.v1.Rerank")
    return server, reranker


async def serve(settings: RerankSettings) -> None:
    server, reranker = build_server(settings)
    log.info("starting", extra={"fields": {"settings": describe(settings)}})
    await server.start()
    server.install_signal_handlers()
    await server.wait_and_stop(on_stop=[reranker.close])
