"""What chat needs besides search: a streaming answer generator, session memory, a condenser."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.search.models import Chunk


@dataclass(frozen=True, slots=True)
class Turn:
    role: str  # "user" or "assistant"
    content: str
    # Heading paths ("Guide > Configuration") of the sources an assistant turn cited: what a
    # follow-up's "it" most likely points at. Empty for user turns.
    cited_headings: tuple[str, ...] = ()


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


def unknown_session() -> RagmeshError:
    # One answer for "never existed", "expired" and "someone else's": an id reveals nothing.
    return RagmeshError(
        ErrorCode.NOT_FOUND,
        "unknown or expired session_id; send the question without session_id to start a new session",
        {"field": "session_id"},
    )


class SessionMemory(abc.ABC):
    """Conversation turns per session. The server issues every session id; ``owner`` is an opaque
    key of the caller, so an id presented by anyone else reads nothing."""

    @abc.abstractmethod
    async def create(self, owner: str) -> str | None:
        """A new, unguessable session id; None when this memory keeps nothing.
        Raises RagmeshError UNAVAILABLE when the store is down."""

    @abc.abstractmethod
    async def history(self, session_id: str, owner: str) -> list[Turn]:
        """Oldest first. Raises NOT_FOUND (unknown, expired or another owner's) or UNAVAILABLE."""

    @abc.abstractmethod
    async def remember(self, session_id: str, owner: str, turns: list[Turn]) -> None:
        """Append turns, keeping the store's caps. Raises UNAVAILABLE when the store is down."""


class NoSessionMemory(SessionMemory):
    """Without a store (no RAGMESH_REDIS_URL) every question stands alone and no id is issued."""

    async def create(self, owner: str) -> str | None:
        return None

    async def history(self, session_id: str, owner: str) -> list[Turn]:
        raise unknown_session()

    async def remember(self, session_id: str, owner: str, turns: list[Turn]) -> None:
        return None


class QuestionCondenser(abc.ABC):
    @abc.abstractmethod
    async def condense(self, question: str, history: list[Turn]) -> str:
        """A question that stands on its own for retrieval; ``question`` itself when it already
        does or the history adds nothing. Never raises for a model failure: it falls back."""


class StandaloneQuestions(QuestionCondenser):
    """No rewriting at all: follow-ups are searched as asked."""

    async def condense(self, question: str, history: list[Turn]) -> str:
        return question
