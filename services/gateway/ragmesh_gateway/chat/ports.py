"""What chat needs besides search: a streaming answer generator and (later) session memory."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ragmesh_gateway.search.models import Chunk


@dataclass(frozen=True, slots=True)
class Turn:
    role: str  # "user" or "assistant"
    content: str


@dataclass(frozen=True, slots=True)
class SourceRef:
    source_id: str
    chunk: Chunk


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    question: str
    sources: list[SourceRef]
    history: list[Turn]
    request_id: str
    max_tokens: int


@dataclass(frozen=True, slots=True)
class GeneratedToken:
    text: str


@dataclass(frozen=True, slots=True)
class GeneratedSources:
    source_ids: list[str]  # the sources the answer cites, in citation order


@dataclass(frozen=True, slots=True)
class GenerationEnd:
    answer_status: str = ""  # "answered", "insufficient_evidence", "withheld"
    model: str = ""
    degraded: list[str] = field(default_factory=list)
    finish_reason: str = ""
    error_code: str = ""  # empty on success
    error_message: str = ""
    answer: str = ""


GenerationEvent = GeneratedToken | GeneratedSources | GenerationEnd


class AnswerGenerator(abc.ABC):
    @abc.abstractmethod
    def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        """Stream tokens, then the cited sources, then one GenerationEnd. Closing the iterator
        cancels the upstream call; failures raise RagmeshError."""


class SessionMemory(abc.ABC):
    @abc.abstractmethod
    async def history(self, session_id: str) -> list[Turn]: ...

    @abc.abstractmethod
    async def remember(self, session_id: str, turns: list[Turn]) -> None: ...


class NoSessionMemory(SessionMemory):
    """Until Redis-backed memory lands, every question is answered on its own."""

    async def history(self, session_id: str) -> list[Turn]:
        return []

    async def remember(self, session_id: str, turns: list[Turn]) -> None:
        return None
