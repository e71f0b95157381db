"""Rerank over gRPC: the Reranker port, with its own short deadline."""

from __future__ import annotations

from ragmesh.v1 import rerank_pb2, rerank_pb2_grpc
from ragmesh_common.rpc.client import unary
from ragmesh_common.telemetry import request_id_var

from ragmesh_gateway.clients.channels import Channels
from ragmesh_gateway.search.models import RerankCandidate, RerankedIndex
from ragmesh_gateway.search.ports import Reranker

PEER = "rerank"


class GrpcReranker(Reranker):
    def __init__(self, channels: Channels, *, timeout_s: float) -> None:
        self._channels = channels
        self._timeout_s = timeout_s

    async def rerank(self, query: str, candidates: list[RerankCandidate]) -> list[RerankedIndex]:
        stub = rerank_pb2_grpc.RerankStub(self._channels.get(PEER))
        request = rerank_pb2.RerankRequest(
            query=query,
            texts=[c.text for c in candidates],
            priors=[rerank_pb2.Prior(dense=c.dense, sparse=c.sparse) for c in candidates],
            top_n=0,
            request_id=request_id_var.get(),
        )
        reply = await unary(
            stub.Rerank,
            request,
            timeout=self._timeout_s,
            peer=PEER,
        )
        return [RerankedIndex(index=r.index, score=r.score) for r in reply.results]
