"""What the OpenAPI document says about the options a grounded answer refuses.

The request Struct takes every field of OpenAI's CreateChatCompletionRequest, so that a client that
sends one gets a 400 naming it (``param``) instead of UNKNOWN_FIELD. The document must still say
which values are accepted: a refused option is documented by its neutral values only (``n``: null
or 1, ``tools``: null or [] ...), and content parts and messages that ragmesh refuses (images,
audio, files, tool calls) as null. ``schemathesis --checks all`` holds the server to it
(tests/integration/gateway/test_api_fuzz.py).
"""

from __future__ import annotations

from typing import Any

from litestar.openapi.spec import OpenAPI, OpenAPIType, Schema

from ragmesh_gateway.openai_chat.service import NEUTRAL_VALUES, REFUSAL_REASONS, MAX_TOKENS

REFUSED_PART_FIELDS = ("image_url", "input_audio", "file")
REFUSED_MESSAGE_FIELDS = ("tool_calls", "function_call")
ACCEPTED_ROLES = ["system", "developer", "user", "assistant"]


def _value_schema(value: Any) -> Schema:
    if value is None:
        return Schema(type=OpenAPIType.NULL)
    if isinstance(value, list):
        if not value:
            return Schema(type=OpenAPIType.ARRAY, max_items=0)
        return Schema(type=OpenAPIType.ARRAY, min_items=len(value), max_items=len(value),
                      items=Schema(enum=list(value)))
    if isinstance(value, dict):
        return Schema(type=OpenAPIType.OBJECT, max_properties=0)
    return Schema(enum=[value])


def neutral_schema(field: str) -> Schema:
    return Schema(one_of=[_value_schema(v) for v in NEUTRAL_VALUES[field]], description=REFUSAL_REASONS[field])


def _null(description: str) -> Schema:
    return Schema(type=OpenAPIType.NULL, description=description)


def declare_refusals(document: OpenAPI) -> None:
    schemas = document.components.schemas  # type: ignore[union-attr]
    request = schemas["ChatCompletionRequest"]
    for field in NEUTRAL_VALUES:
        request.properties[field] = neutral_schema(field)  # type: ignore[index]
    text_format = Schema(type=OpenAPIType.OBJECT, properties={"type": Schema(enum=["text"])},
                         description="text only: answers are prose with [S1] citations")
    request.properties["response_format"] = Schema(one_of=[text_format, Schema(type=OpenAPIType.NULL)])  # type: ignore[index]
    for field in ("max_tokens", "max_completion_tokens"):
        request.properties[field] = Schema(one_of=[  # type: ignore[index]
            Schema(type=OpenAPIType.INTEGER, minimum=1, maximum=MAX_TOKENS), Schema(type=OpenAPIType.NULL)])
    part = schemas["ContentPart"]
    for field in REFUSED_PART_FIELDS:
        part.properties[field] = _null("not supported: ragmesh answers text questions (400)")  # type: ignore[index]
    message = schemas["ChatMessage"]
    for field in REFUSED_MESSAGE_FIELDS:
        message.properties[field] = _null("not supported: ragmesh calls no tools (400)")  # type: ignore[index]
    message.properties["role"] = Schema(enum=ACCEPTED_ROLES,  # type: ignore[index]
                                        description="tool and function messages are refused (400)")
