"""What the rerank service needs from a model runtime, as an abstract async port."""

from __future__ import annotations

import abc
from dataclasses import dataclass


@dataclass(frozen=True)
class RankedText:
    index: int  # position in the request's texts
    score: float  # an ordering signal, not a probability


@dataclass(frozen=True)
class RerankerIdentity:
    model_id: str
    score_kind: str  # what the runtime says its score is, e.g. "cross_encoder"
    max_texts: int | None = None  # most texts the runtime takes per request, when it says so


class Reranker(abc.ABC):
    @abc.abstractmethod
    async def rerank(self, query: str, texts: list[str], *, timeout: float) -> list[RankedText]:
        """Scores for every text, best first. Raises RagmeshError (UNAVAILABLE, DEADLINE_EXCEEDED,
        RUNTIME_ERROR) when the runtime cannot answer within ``timeout`` seconds."""

    @abc.abstractmethod
    async def identity(self, *, timeout: float) -> RerankerIdentity:
        """Which model scores, and what kind of score it returns."""

    async def close(self) -> None:
        return None
