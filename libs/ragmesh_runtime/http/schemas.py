"""Request bodies of the TEI and OpenAI routes, as msgspec Structs.

Unknown fields are ignored, as TEI and vLLM do: OpenAI clients send sampling options
(temperature, top_p, ...) that an extractive answerer has no use for.
"""

from __future__ import annotations

from typing import Literal, TypeVar

import msgspec

from ragmesh_common.errors import ErrorCode, RagmeshError

S = TypeVar("S")

TruncationDirection = Literal["right", "left", "Right", "Left"]


class EmbedRequest(msgspec.Struct):
    inputs: str | list[str]
    normalize: bool = True
    truncate: bool | None = None
    truncation_direction: TruncationDirection = "right"
    prompt_name: str | None = None


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
