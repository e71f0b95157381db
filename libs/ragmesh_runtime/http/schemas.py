"""Request bodies of the TEI and OpenAI routes, as msgspec Structs.

Unknown fields are ignored, as TEI and vLLM do: OpenAI clients send sampling options
(logprobs, presence_penalty, ...); temperature, top_p, stop and seed reach a language model
profile, and an extractive answerer has no use for them.

TEI's ``Input`` is a text, a list of token ids, or a batch of either; msgspec takes one array type
per union, so the list forms are decoded as ``list[Any]`` and sorted out by :func:`embed_inputs`.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import msgspec

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_runtime.service import EmbedInput

S = TypeVar("S")

TruncationDirection = Literal["right", "left", "Right", "Left"]


class EmbedRequest(msgspec.Struct):
    inputs: str | list[Any]
    normalize: bool = True
    truncate: bool | None = None
    truncation_direction: TruncationDirection = "right"
    prompt_name: str | None = None
    dimensions: int | None = None


class OpenAiEmbeddingsRequest(msgspec.Struct):
    """TEI's OpenAI-compatible ``/v1/embeddings`` body (``model`` and ``user`` are ignored, as TEI does)."""

    input: str | list[Any]
    model: str | None = None
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None


class TokenizeRequest(msgspec.Struct):
    inputs: str | list[str]
    add_special_tokens: bool = True
    prompt_name: str | None = None


class DecodeRequest(msgspec.Struct):
    ids: list[Any]
    skip_special_tokens: bool = True


class RerankRequest(msgspec.Struct):
    query: str
    texts: list[str]
    raw_scores: bool = False
    return_text: bool = False
    truncate: bool | None = None
    truncation_direction: TruncationDirection = "right"


class ContentPart(msgspec.Struct):
    type: str
    text: str | None = None


class ChatMessage(msgspec.Struct):
    role: str
    content: str | list[ContentPart] | None = None


class StreamOptions(msgspec.Struct):
    include_usage: bool = False


class ChatCompletionRequest(msgspec.Struct):
    messages: list[ChatMessage]
    model: str | None = None
    stream: bool = False
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    n: int = 1
    stream_options: StreamOptions | None = None
    # Sampling options a language model profile passes to its engine; the extractive one ignores them.
    temperature: float | None = None
    top_p: float | None = None
    stop: str | list[str] | None = None
    seed: int | None = None


def _is_ids(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in value)


def embed_inputs(inputs: str | list[Any]) -> list[EmbedInput]:
    """TEI's ``Input``: a text or token ids (one input), or a list of those (a batch)."""
    if isinstance(inputs, str) or (inputs and _is_ids(inputs)):
        return [inputs]
    batch: list[EmbedInput] = []
    for index, item in enumerate(inputs):
        if not isinstance(item, str) and not _is_ids(item):
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT,
                               f"inputs[{index}] must be a string or a list of token ids")
        batch.append(item)
    return batch


def id_lists(ids: list[Any]) -> list[list[int]]:
    """TEI's ``InputIds``: one list of ids or a list of them."""
    if _is_ids(ids) and ids:
        return [ids]
    if all(_is_ids(item) for item in ids):
        return ids
    raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "ids must be a list of token ids or a list of such lists")


def decode_body(body: bytes, schema: type[S]) -> S:
    """Decode a JSON body, turning every malformed or mistyped body into a client error."""
    if not body:
        raise RagmeshError(ErrorCode.MALFORMED_BODY, "request body must be a JSON object")
    try:
        return msgspec.json.decode(body, type=schema)
    except msgspec.ValidationError as exc:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"invalid request body: {exc}") from None
    except msgspec.DecodeError:
        raise RagmeshError(ErrorCode.MALFORMED_BODY, "request body is not valid JSON") from None


def message_text(message: ChatMessage) -> str:
    """The text of a message; only text parts are understood."""
    if message.content is None:
        return ""
    if isinstance(message.content, str):
        return message.content
    texts = []
    for part in message.content:
        if part.type != "text" or part.text is None:
            raise RagmeshError(
                ErrorCode.INVALID_ARGUMENT, f"content part type {part.type!r} is not supported"
            )
        texts.append(part.text)
    return "\n".join(texts)
