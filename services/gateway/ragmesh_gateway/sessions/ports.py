"""Conversation memory for chat: the turns of a session, where they are kept, and how a follow-up
becomes a question that stands on its own. Adapters: ``redis_memory`` (Redis), ``condense`` (rules),
``llm_condenser`` (a chat model); session ids in ``ids``."""

from __future__ import annotations

import abc
from dataclasses import dataclass

from ragmesh_common.errors import ErrorCode, RagmeshError


@dataclass(frozen=True, slots=True)
class Turn:
    role: str  # "user" or "assistant"
    content: str
    # Heading paths ("Guide > Configuration") of the sources an assistant turn cited: what a
    # follow-up's "it" most likely points at. Empty for user turns.
    cited_headings: tuple[str, ...] = ()


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
