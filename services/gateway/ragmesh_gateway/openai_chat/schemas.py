"""The OpenAI Chat Completions contract as ragmesh serves it: the request (every field of OpenAI's
CreateChatCompletionRequest, so a field outside it is UNKNOWN_FIELD), the completion, the stream
chunks, the model list, the error body, and the ``ragmesh`` extension that carries the sources.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from ragmesh_gateway.chat.schemas import SourcesBasis
from ragmesh_gateway.search.schemas import SearchHit, SecuritySummary

Role = Literal["system", "developer", "user", "assistant", "tool", "function"]


class ContentPart(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    type: str
    text: str | None = None
    refusal: str | None = None
    image_url: dict[str, Any] | None = None
    input_audio: dict[str, Any] | None = None
    file: dict[str, Any] | None = None


class ChatMessage(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    role: Role
    content: str | list[ContentPart] | None = None
    name: str | None = None
    refusal: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    function_call: dict[str, Any] | None = None
    audio: dict[str, Any] | None = None


class StreamOptions(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    include_usage: bool | None = None
    include_obfuscation: bool | None = None


class ChatCompletionRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """OpenAI's chat completion request. ragmesh answers the last user message from the indexed
    documents; earlier user/assistant messages are the conversation, system and developer messages
    are read as no instruction (ragmesh's own grounding rules apply). Options a grounded answer
    cannot honour are refused with 400 and their ``param``; sampling options change nothing."""

    model: Annotated[str, Meta(description="'ragmesh' (every corpus you may read) or 'ragmesh/<corpus>'.")]
    messages: list[ChatMessage]
    stream: bool | None = None
    stream_options: StreamOptions | None = None
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int | None = None
    # Refused unless absent or neutral: a grounded text answer cannot honour them.
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    functions: list[dict[str, Any]] | None = None
    function_call: str | dict[str, Any] | None = None
    response_format: dict[str, Any] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = None
    logit_bias: dict[str, float] | None = None
    stop: str | list[str] | None = None
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None
    # Accepted and ignored: the answer is copied from the documents' cited lines either way.
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    user: str | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    metadata: dict[str, str] | None = None
    store: bool | None = None
    service_tier: str | None = None
    reasoning_effort: str | None = None
    verbosity: str | None = None


class RagmeshExtension(msgspec.Struct, kw_only=True):
    """Not part of OpenAI's schema: what the answer rests on. ``sources`` are the sources the answer
    cites (the link [S1](url) in the text is ``source_id`` S1), or, when nothing was answered, the
    retrieval results with ``sources_basis: "retrieved"``."""

    request_id: str
    answer_status: Annotated[str, Meta(description="answered, insufficient_evidence or withheld.")]
    finish_reason: Annotated[str, Meta(description="ragmesh's own, e.g. no_sources, verification_failed.")]
    sources: list[SearchHit]
    sources_basis: SourcesBasis
    security: SecuritySummary
    index_version: str | None
    index_versions: list[str]
    degraded: list[str]
    hint: str | None = None


class UrlCitation(msgspec.Struct, kw_only=True):
    """Where one link of the content points. Offsets count characters (Unicode code points) from
    the start of the whole content; ``end_index`` is exclusive: content[start_index:end_index] is
    the link ``[S1](url)``."""

    url: Annotated[str, Meta(description="Absolute url of the cited source (its lines are marked).")]
    title: str
    start_index: Annotated[int, Meta(ge=0)]
    end_index: Annotated[int, Meta(ge=1)]


class Annotation(msgspec.Struct, kw_only=True):
    """OpenAI's ``url_citation`` annotation (``ChatCompletionMessage.annotations``)."""

    type: Literal["url_citation"] = "url_citation"
    url_citation: UrlCitation


class DeltaAnnotation(Annotation, kw_only=True):
    """An annotation sent in a stream chunk, beside the content it indexes. ``index`` is its place
    in the message's annotations, which lets the SDKs' stream helpers gather them into
    ``message.annotations``; offsets count from the start of the whole streamed content."""

    index: int


class AssistantMessage(msgspec.Struct, kw_only=True):
    role: Literal["assistant"] = "assistant"
    content: Annotated[str, Meta(description="The answer; each citation a Markdown link [S1](url).")]
    refusal: None = None
    annotations: list[Annotation] = []


class Choice(msgspec.Struct, kw_only=True):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop", "length"]
    logprobs: None = None


class Usage(msgspec.Struct, kw_only=True):
    """Counted in words of the messages and the answer (the generator's own tokens are not known here)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(msgspec.Struct, kw_only=True):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    system_fingerprint: None = None
    ragmesh: RagmeshExtension


class Delta(msgspec.Struct, kw_only=True):
    role: Literal["assistant"] | msgspec.UnsetType = msgspec.UNSET
    content: str | msgspec.UnsetType = msgspec.UNSET
    # Not in the SDKs' ChoiceDelta type: they keep it as an extra field (delta.model_extra).
    annotations: list[DeltaAnnotation] | msgspec.UnsetType = msgspec.UNSET


class ChunkChoice(msgspec.Struct, kw_only=True):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop", "length"] | None = None
    logprobs: None = None


class ChatCompletionChunk(msgspec.Struct, kw_only=True):
    """One server-sent event of a streamed completion; the finishing chunk carries ``ragmesh``,
    the usage chunk (``stream_options.include_usage``) ``usage``."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | msgspec.UnsetType = msgspec.UNSET
    ragmesh: RagmeshExtension | msgspec.UnsetType = msgspec.UNSET


class Model(msgspec.Struct, kw_only=True):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "ragmesh"


class ModelList(msgspec.Struct, kw_only=True):
    object: Literal["list"] = "list"
    data: list[Model]


class OpenAiErrorDetail(msgspec.Struct, kw_only=True):
    message: str
    type: str
    param: str | None
    code: Annotated[str, Meta(description="ragmesh's stable code, or model_not_found.")]
    request_id: str | None = None


class OpenAiError(msgspec.Struct, kw_only=True):
    error: OpenAiErrorDetail
