"""Generation over gRPC: the AnswerGenerator port (server streaming, cancelled on close)."""

from __future__ import annotations

from collections.abc import AsyncIterator

from ragmesh.v1 import generation_pb2, generation_pb2_grpc
from ragmesh_common.rpc.client import stream

from ragmesh_gateway.chat.ports import (
    AnswerGenerator,
    GeneratedSources,
    AnswerToken,
    GenerationEnd,
    GenerationEvent,
    GenerationRequest,
)
from ragmesh_gateway.clients.channels import Channels
from ragmesh_gateway.clients.convert import chunk_to_pb

PEER = "generation"


class GrpcAnswerGenerator(AnswerGenerator):
    def __init__(self, channels: Channels, *, timeout_s: float) -> None:
        self._channels = channels
        self._timeout_s = timeout_s

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        stub = generation_pb2_grpc.GenerationStub(self._channels.get(PEER))
        message = generation_pb2.GenerateRequest(
            question=request.question,
            sources=[
                generation_pb2.Source(source_id=s.source_id, chunk=chunk_to_pb(s.chunk))
                for s in request.sources
            ],
            history=[generation_pb2.Turn(role=t.role, content=t.content) for t in request.history],
            request_id=request.request_id,
            max_tokens=request.max_tokens,
        )
        events = stream(stub.Generate, message, timeout=self._timeout_s, peer=PEER)
        try:
            async for event in events:
                kind = event.WhichOneof("event")
                if kind == "token":
                    yield AnswerToken(text=event.token.text)
                elif kind == "sources":
                    yield GeneratedSources(source_ids=[s.source_id for s in event.sources.sources])
                elif kind == "done":
                    d = event.done
                    # Let the server end the call itself: stopping here would cancel it mid-close.
                    async for _ in events:
                        pass
                    yield GenerationEnd(
                        answer_status=d.answer_status,
                        model=d.model,
                        degraded=list(d.degraded),
                        finish_reason=d.finish_reason,
                        error_code=d.error_code,
                        error_message=d.error_message,
                        answer=d.answer,
                    )
        finally:
            await events.aclose()
