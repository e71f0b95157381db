"""What answers /v1/chat/completions: one port, one generator per profile (RAGMESH_RUNTIME_GENERATOR).

``extractive`` (the default) copies evidence units (ragmesh_runtime.generator); ``llm`` runs a GGUF
model through llama.cpp (ragmesh_runtime.llm). The OpenAI routes only translate the wire format;
both profiles stream the same events: text pieces, then exactly one :class:`ChatFinish`.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, AsyncIterator, Sequence

from ragmesh_runtime.generator.prompt_protocol import ChatTurn
from ragmesh_runtime.generator.word_chunks import count_word_chunks, word_chunks

if TYPE_CHECKING:
    from ragmesh_runtime.service import RuntimeService
    from ragmesh_runtime.settings import RuntimeSettings


@dataclass(frozen=True)
class ChatOptions:
    max_tokens: int | None = None  # None: the profile's default
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    seed: int | None = None


@dataclass(frozen=True)
class ChatFinish:
    reason: str  # "stop", "length" (max_tokens), "time_limit" (the wall-clock cap), "error"
    prompt_tokens: int
    completion_tokens: int


ChatEvent = str | ChatFinish


class ChatGenerator(abc.ABC):
    model_id: str
    max_model_len: int

    @abc.abstractmethod
    def complete(self, turns: Sequence[ChatTurn], options: ChatOptions) -> AsyncIterator[ChatEvent]:
        """Text pieces, then one ChatFinish. Bad input raises RagmeshError before the first event."""

    @abc.abstractmethod
    def describe(self) -> dict[str, object]:
        """What really answers, for /info."""

    def card(self) -> dict[str, object]:
        """Fields added to this model's /v1/models entry."""
        return {}

    def close(self) -> None:
        return None


@dataclass
class ExtractiveChatGenerator(ChatGenerator):
    """The extractive answerer: the whole answer is chosen, then sent word by word."""

    service: RuntimeService
    model_id: str = field(init=False)
    max_model_len: int = field(init=False)

    def __post_init__(self) -> None:
        self.model_id = self.service.settings.generator.model_id
        self.max_model_len = self.service.settings.generator.max_prompt_chars

    async def complete(self, turns: Sequence[ChatTurn], options: ChatOptions) -> AsyncIterator[ChatEvent]:
        answer = await self.service.answer(turns)
        pieces = word_chunks(answer.text)
        reason = "stop"
        if options.max_tokens is not None and len(pieces) > options.max_tokens:
            pieces, reason = pieces[: options.max_tokens], "length"
        for piece in pieces:
            yield piece
        yield ChatFinish(reason, sum(count_word_chunks(turn.content) for turn in turns), len(pieces))

    def describe(self) -> dict[str, object]:
        generator = self.service.settings.generator
        return {
            "profile": "extractive",
            "model_id": self.model_id,
            "description": (
                "extractive, not an LLM: copies the 1-"
                f"{generator.max_units} evidence units (sentences, table rows with their headers, list "
                "items, key: value lines, code lines) closest to the question (MiniLM cosine + "
                f"{generator.lexical_weight} x term overlap, less {generator.rank_weight} per source "
                f"rank and {generator.kind_penalty} when the unit cannot hold the kind of answer asked "
                "for), inline Markdown removed, each followed by its [S#]; answers "
                f"INSUFFICIENT_EVIDENCE when the best score is below {generator.min_score}"
            ),
            "max_prompt_chars": generator.max_prompt_chars,
        }


def build_chat_generator(settings: RuntimeSettings, service: RuntimeService) -> ChatGenerator:
    """The configured profile; the llm profile verifies and loads its model here (or stops the start)."""
    if settings.generator_profile == "llm":
        from ragmesh_runtime.llm.generator import LlmChatGenerator

        return LlmChatGenerator.load(settings)
    return ExtractiveChatGenerator(service)
