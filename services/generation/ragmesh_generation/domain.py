"""What a grounded answer is made of: the request, the evidence, and the events it streams.

Pure data, no I/O: the servicer builds these from protobuf, the answerer consumes and yields them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class AnswerStatus(enum.StrEnum):
    ANSWERED = "answered"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"
    WITHHELD = "withheld"


@dataclass(frozen=True)
class EvidenceSource:
    source_id: str  # "S1", "S2", ...
    title: str
    heading: str  # heading path joined with " > "
    url: str
    # What the model reads and what quotes are checked against: one text for both, so a quote
    # can only pass if the model could have copied it.
    text: str
    # The retrieved chunk itself when ``text`` is its parent section: a section cut to fit the
    # prompt keeps the part around it, not the section's head.
    focus: str = ""


@dataclass(frozen=True)
class HistoryTurn:
    role: str  # "user" or "assistant"
    content: str


@dataclass(frozen=True)
class AnswerRequest:
    question: str
    sources: list[EvidenceSource]
    history: list[HistoryTurn] = field(default_factory=list)
    request_id: str = ""
    max_tokens: int = 0  # 0: the service default


@dataclass(frozen=True)
class PromptFit:
    """The first event: how the evidence was fitted into the model's context (``meta`` on gRPC).
    All zero and empty when the context length is unknown (no token budget applied)."""

    context_tokens: int = 0
    prompt_tokens: int = 0  # of the prompt sent (counted or estimated, see counted_by)
    sources_dropped: tuple[str, ...] = ()  # ids of sources left out for room
    sources_cut: tuple[str, ...] = ()  # ids of sources shortened for room
    counted_by: str = ""  # "tokenizer" (the runtime's), "estimate", or "" (no budget)


@dataclass(frozen=True)
class AnswerToken:
    text: str


@dataclass(frozen=True)
class CitedSources:
    source_ids: tuple[str, ...]  # in order of first citation


@dataclass(frozen=True)
class AnswerDone:
    answer_status: AnswerStatus
    model: str
    finish_reason: str
    answer: str
    degraded: tuple[str, ...] = ()
    error_code: str = ""
    error_message: str = ""
    # Not on the wire; for logs, metrics and bench/generation_checks.py.
    attempts: int = 0
    problems: tuple[str, ...] = ()  # verification failure kinds of the last failed check
    repaired: bool = False  # citations were added by post-hoc attribution


AnswerEvent = PromptFit | AnswerToken | CitedSources | AnswerDone
