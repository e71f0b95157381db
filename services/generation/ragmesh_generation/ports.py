"""What the generation service needs from a chat model runtime, as an abstract async port."""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import AsyncIterator, Sequence


@dataclass(frozen=True)
class ModelDelta:
    text: str
    finish_reason: str | None = None
    model: str = ""


class ChatModel(abc.ABC):
    #: gen_ai.system of the spans: which API family the runtime speaks.
    system: str = "openai"

    @abc.abstractmethod
    async def model_id(self) -> str:
        """The model that will answer (asks the runtime when none is configured).
        Raises RagmeshError: UNAVAILABLE, DEADLINE_EXCEEDED, RUNTIME_ERROR."""

    @abc.abstractmethod
    def stream(self, messages: list[dict[str, str]], *, max_tokens: int) -> AsyncIterator[ModelDelta]:
        """Deltas as the runtime produces them. Closing the iterator early must stop the upstream
        request. Failures raise RagmeshError with UNAVAILABLE, DEADLINE_EXCEEDED or RUNTIME_ERROR."""

    async def context_tokens(self) -> int | None:
        """The context length the runtime reports, None when it says none. May raise RagmeshError."""
        return None

    async def count_tokens(self, texts: Sequence[str]) -> list[int] | None:
        """Each text's length in the model's own tokens, None when the runtime has no tokenizer."""
        return None

    async def close(self) -> None:
        return None
