"""HTTP/MCP contract of chat: the request, the SSE event payloads and the collected answer."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import msgspec
from msgspec import UNSET, Meta, UnsetType

from ragmesh_common.answer_defaults import ANSWER_SOURCES
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.text_safety import NON_BLANK_TEXT_PATTERN

from ragmesh_gateway.search.schemas import (
    QUERY_MAX_CHARS,
    TOP_K_MAX,
    SearchFilters,
    SearchHit,
    SecuritySummary,
)

SESSION_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
SourcesBasis = Literal["cited", "retrieved"]


_QUESTION_TEXT = {"min_length": 1, "max_length": QUERY_MAX_CHARS, "pattern": NON_BLANK_TEXT_PATTERN}
_QUERY = Annotated[str, Meta(**_QUESTION_TEXT, description="The question (not blank).")]
_ALIAS = Annotated[str, Meta(**_QUESTION_TEXT, description="Alias of query: send one of the two.")]


class ChatRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Answer a question from the indexed documents, citing them. The question is ``query``, as in
    search; ``question`` is its alias (the name this body used first): send exactly one of them."""

    # Exactly one of these fields is required: the JSON Schema of the body says so (``oneOf``, added
    # by the OpenAPI plugin and the MCP tool schema), ``__post_init__`` enforces it.
    __required_one_of__: ClassVar[tuple[str, ...]] = ("query", "question")

    query: _QUERY | UnsetType = UNSET
    question: _ALIAS | UnsetType = UNSET
    top_k: (
        Annotated[int, Meta(ge=1, le=TOP_K_MAX, description=f"Sources to ground on (default {ANSWER_SOURCES}).")] | None
    ) = None
    filters: SearchFilters | None = None
    session_id: (
        Annotated[
            str,
            Meta(
                pattern=SESSION_ID_PATTERN,
                description="A session id the server issued (meta.session_id of an earlier answer); "
                "omit it to start a new session. Unknown or expired ids are a 404 NOT_FOUND.",
            ),
        ]
        | None
    ) = None
    max_tokens: Annotated[int, Meta(ge=1, le=4096, description="Answer length cap.")] | None = None

    def __post_init__(self) -> None:
        # A RagmeshError passes through msgspec's decoding as it is: the REST body and the MCP tool
        # arguments are refused with the same code and message.
        if self.query is not UNSET and self.question is not UNSET:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "both `query` and `question` were given: they are "
                               "the same argument (question is an alias of query), send one", {"path": "$"})
        if self.query is UNSET:
            if self.question is UNSET:
                missing = "Object missing required field `query` (or its alias `question`)"
                raise RagmeshError(ErrorCode.MALFORMED_BODY, missing, {"path": "$"})
            self.query = self.question


class ChatMeta(msgspec.Struct, kw_only=True):
    """SSE ``meta``: sent first."""

    request_id: str
    index_version: str | None
    index_versions: list[str]
    model: str
    session_id: Annotated[
        str | None, Meta(description="Send it back as session_id to ask a follow-up; null: no memory.")
    ]
    degraded: list[str]
    condensed_question: Annotated[
        str | None, Meta(description="What was searched when session memory rewrote a follow-up.")
    ] = None


class ChatToken(msgspec.Struct, kw_only=True):
    """SSE ``token``: a piece of the answer."""

    text: str


class ChatSources(msgspec.Struct, kw_only=True):
    """SSE ``sources``: the sources the answer cites, in citation order; when no answer could be
    given (withheld, failed) the retrieval results instead, with ``basis: "retrieved"``."""

    sources: list[SearchHit]
    security: SecuritySummary
    basis: SourcesBasis = "cited"


class ChatDone(msgspec.Struct, kw_only=True):
    """SSE ``done``: the successful terminal event."""

    answer_status: Annotated[str, Meta(description="answered, insufficient_evidence or withheld.")]
    model: str
    finish_reason: str
    degraded: list[str]
    hint: Annotated[str | None, Meta(description="Retrieval's advice when nothing was found.")] = None


class ChatError(msgspec.Struct, kw_only=True):
    """SSE ``error``: the failed terminal event."""

    code: str
    message: str
    request_id: str | None = None
    degraded: list[str] = []


class AnswerResponse(msgspec.Struct, kw_only=True):
    """The whole answer at once (POST /chat and the answer_from_articles tool)."""

    request_id: str
    status: Annotated[str, Meta(description="'done' or 'error'.")]
    answer: str
    answer_status: str
    model: str
    finish_reason: str
    degraded: list[str]
    index_version: str | None
    index_versions: list[str]
    session_id: str | None
    sources: list[SearchHit]
    security: SecuritySummary
    error: ChatError | None = None
    sources_basis: SourcesBasis = "cited"
    condensed_question: str | None = None
    hint: str | None = None
