"""One question inside its session: read the history, condense the question, record the exchange.

Session memory is an aid, never a reason to fail: a store that is down (UNAVAILABLE) means the
question is answered on its own and ``degraded`` says ``session_memory``. An id the store does not
know for this caller (NOT_FOUND) is the client's to fix, so that error goes out before any stream.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.sessions.ids import owner_key
from ragmesh_gateway.sessions.ports import QuestionCondenser, SessionMemory, Turn

log = logging.getLogger("ragmesh.gateway.chat")

SESSION_MEMORY = "session_memory"
_MARKERS = re.compile(r"\s*\[\s*S\d+(?:\s*[,;]\s*S\d+)*\s*\]")


@dataclass(slots=True)
class Conversation:
    session_id: str | None
    owner: str
    history: list[Turn]
    question: str  # as asked
    standalone: str  # what is searched and answered: the question, condensed when it was a follow-up
    degraded: list[str] = field(default_factory=list)

    @property
    def condensed_question(self) -> str | None:
        return self.standalone if self.standalone != self.question else None


class Conversations:
    def __init__(
        self,
        memory: SessionMemory,
        condenser: QuestionCondenser,
        *,
        max_question_chars: int = 2000,
        on_degraded: Callable[[str], None] = lambda component: None,
    ) -> None:
        self._memory = memory
        self._condenser = condenser
        self._max_question_chars = max_question_chars
        self._on_degraded = on_degraded

    async def open(
        self, question: str, session_id: str | None, caller: Caller, history: list[Turn] | None = None
    ) -> Conversation:
        """``history`` given: the client keeps the conversation (OpenAI-style messages); nothing is
        read from or stored in session memory."""
        owner = owner_key(caller.principal)
        conversation = Conversation(session_id, owner, list(history or []), question, question)
        try:
            if history is not None:
                conversation.session_id = None
            elif session_id:
                conversation.history = await self._memory.history(session_id, owner)
            else:
                conversation.session_id = await self._memory.create(owner)
        except RagmeshError as exc:
            if exc.code is not ErrorCode.UNAVAILABLE:
                raise
            self._degrade(conversation, exc)
        if conversation.history:
            condensed = (await self._condenser.condense(question, conversation.history)).strip()
            # Past the search limit the follow-up is searched as asked rather than refused.
            if condensed and len(condensed) <= self._max_question_chars:
                conversation.standalone = condensed
        return conversation

    async def record(self, conversation: Conversation, answer: str, cited_headings: list[str]) -> None:
        """Store the exchange (before the client sees ``done``, so a quick follow-up finds it)."""
        if not conversation.session_id or SESSION_MEMORY in conversation.degraded:
            return
        turns = [Turn("user", conversation.standalone)]
        # Citation markers name the sources of *that* answer; in a later prompt they would point at
        # whatever is S1 then, so the history keeps the words and the cited headings instead.
        reply = without_citation_markers(answer)
        if reply:
            turns.append(Turn("assistant", reply, tuple(dict.fromkeys(cited_headings))))
        try:
            await self._memory.remember(conversation.session_id, conversation.owner, turns)
        except RagmeshError as exc:
            self._degrade(conversation, exc)

    def _degrade(self, conversation: Conversation, exc: RagmeshError) -> None:
        if SESSION_MEMORY not in conversation.degraded:
            conversation.degraded.append(SESSION_MEMORY)
            self._on_degraded(SESSION_MEMORY)
        log.warning("session memory unavailable", extra={"fields": {"code": exc.code.value}})


def without_citation_markers(text: str) -> str:
    """An earlier answer for a later prompt: its [S1] markers named *that* answer's sources."""
    return _MARKERS.sub("", text).strip()
