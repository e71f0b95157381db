"""Protobuf <-> use case for the Generation service; nothing else happens here."""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from typing import AsyncIterator

import grpc
from ragmesh.v1 import generation_pb2, generation_pb2_grpc

from ragmesh_common.telemetry import request_id_var

from ragmesh_generation.answerer import GroundedAnswerer
from ragmesh_generation.domain import (
    AnswerDone, AnswerRequest, AnswerToken, CitedSources, EvidenceSource, HistoryTurn, PromptFit,
)


def to_request(request: generation_pb2.GenerateRequest) -> AnswerRequest:
    sources = [
        EvidenceSource(
            source_id=s.source_id,
            title=s.chunk.title,
            heading=" > ".join(s.chunk.heading_path),
            url=s.chunk.url,
            # The expanded parent section when retrieval sent one, else the chunk itself.
            text=s.chunk.content or s.chunk.quote,
            focus=s.chunk.quote if s.chunk.content else "",
        )
        for s in request.sources
    ]
    history = [HistoryTurn(t.role, t.content) for t in request.history]
    return AnswerRequest(request.question, sources, history, request.request_id, request.max_tokens)


class GenerationServicer(generation_pb2_grpc.GenerationServicer):
    def __init__(self, answerer: GroundedAnswerer) -> None:
        self._answerer = answerer

    async def Generate(self, request: generation_pb2.GenerateRequest, context: grpc.aio.ServicerContext
                       ) -> AsyncIterator[generation_pb2.GenerateEvent]:
        if request.request_id and not request_id_var.get():
            request_id_var.set(request.request_id)  # the interceptor's reset undoes this too
        by_id = {s.source_id: s for s in request.sources}
        events = self._answerer.answer(to_request(request), time_remaining=context.time_remaining())
        # aclosing: a caller that hangs up closes the answerer, which closes the runtime stream.
        async with contextlib.aclosing(events):
            async for event in events:
                if isinstance(event, PromptFit):
                    yield generation_pb2.GenerateEvent(meta=generation_pb2.PromptFit(**asdict(event)))
                elif isinstance(event, AnswerToken):
                    yield generation_pb2.GenerateEvent(token=generation_pb2.TokenDelta(text=event.text))
                elif isinstance(event, CitedSources):
                    yield generation_pb2.GenerateEvent(sources=generation_pb2.SourceList(
                        sources=[by_id[i] for i in event.source_ids]))
                elif isinstance(event, AnswerDone):
                    yield generation_pb2.GenerateEvent(done=generation_pb2.Terminal(
                        answer_status=event.answer_status.value, model=event.model,
                        degraded=list(event.degraded), finish_reason=event.finish_reason,
                        error_code=event.error_code, error_message=event.error_message, answer=event.answer))
