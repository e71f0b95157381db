"""The answer stream's one vocabulary: what the generator yields (``AnswerToken``, ``GeneratedSources``,
``GenerationEnd``) and what chat streams to its edges (``AnswerToken``, ``AnswerSources``, ``AnswerDone``,
``AnswerFailed``); the edges only encode these (``chat.presenters``, ``openai_chat.presenters``).
And the port chat needs besides search and session memory: a streaming answer generator."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ragmesh_common.chunk_record import Chunk

from ragmesh_gateway.search.service import RankedSource
from ragmesh_gateway.sessions.ports import Turn


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
class AnswerToken:
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


GenerationEvent = AnswerToken | GeneratedSources | GenerationEnd


class AnswerGenerator(abc.ABC):
    @abc.abstractmethod
    def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        """Stream tokens, then the cited sources, then one GenerationEnd. Closing the iterator
        cancels the upstream call; failures raise RagmeshError."""


# What chat streams to its edges (REST/SSE, OpenAI, MCP): the generator's tokens as they come, then
# exactly one AnswerSources, then exactly one AnswerDone or AnswerFailed (see chat.service).
@dataclass(frozen=True, slots=True)
class AnswerSources:
    sources: list[RankedSource]
    # "cited": the sources the answer cites, in citation order. "retrieved": no answer was given
    # (withheld, failed); these are the retrieval results, for the client to show instead.
    basis: str = "cited"


@dataclass(frozen=True, slots=True)
class AnswerDone:
    answer_status: str
    model: str
    finish_reason: str
    degraded: list[str]
    answer: str
    hint: str = ""


@dataclass(frozen=True, slots=True)
class AnswerFailed:
    code: str
    message: str
    degraded: list[str] = field(default_factory=list)


AnswerEvent = AnswerToken | AnswerSources | AnswerDone | AnswerFailed
