"""Protobuf <-> use case for the Rerank service; nothing else happens here."""

from __future__ import annotations

import grpc
from ragmesh.v1 import rerank_pb2, rerank_pb2_grpc

from ragmesh_common.telemetry import request_id_var

from ragmesh_rerank.fusion import Prior
from ragmesh_rerank.service import RerankQuery, RerankService


class RerankServicer(rerank_pb2_grpc.RerankServicer):
    def __init__(self, service: RerankService) -> None:
        self._service = service

    async def Rerank(self, request: rerank_pb2.RerankRequest, context: grpc.aio.ServicerContext
                     ) -> rerank_pb2.RerankResponse:
        if request.request_id and not request_id_var.get():
            request_id_var.set(request.request_id)  # the interceptor's reset undoes this too
        priors = [Prior(dense=p.dense if p.HasField("dense") else None,
                        sparse=p.sparse if p.HasField("sparse") else None) for p in request.priors]
        outcome = await self._service.rerank(
            RerankQuery(request.query, list(request.texts), request.top_n, priors),
            time_remaining=context.time_remaining(),
        )
        return rerank_pb2.RerankResponse(
            results=[rerank_pb2.RerankResult(index=r.index, score=r.score) for r in outcome.results],
            model_id=outcome.model_id,
            score_kind=outcome.score_kind,
        )
