"""The OpenAPI document says exactly what the server accepts.

Litestar derives schemas from the msgspec Structs but leaves out two rules the edge enforces:

* a request Struct with ``forbid_unknown_fields`` refuses unknown members (UNKNOWN_FIELD), so its
  schema gets ``additionalProperties: false``;
* every string of a request is safe text (``ragmesh_common.text_safety``: no NUL, no other
  control character), so each string property without a pattern of its own gets that pattern, and
  so do the keys and string values of a map.

Both are added by :class:`RequestContractPlugin`, which Litestar asks before its own Struct plugin.
:func:`complete_document` then adds what no type says: the envelope of each server-sent event of
the chat stream (``event`` + ``data`` holding the JSON of that event's schema) and the links
between operations (a build's version is what promote takes, ...).
``schemathesis --checks all`` (tests/integration/gateway/test_api_fuzz.py) holds the document and
the server to each other.
"""

from __future__ import annotations

import msgspec
from litestar._openapi.schema_generation.plugins import StructSchemaPlugin
from litestar.openapi.spec import Link, OpenAPI, OpenAPIType, Reference, Schema
from litestar.typing import FieldDefinition

from ragmesh_common.text_safety import SAFE_TEXT_PATTERN


def _safe_strings(schema: Schema | object) -> None:
    """Add the safe-text pattern to string schemas (also inside unions and arrays) lacking one."""
    if not isinstance(schema, Schema):
        return  # a Reference: its own component is handled when it is created
    if schema.type == "string" or getattr(schema.type, "value", None) == "string":
        if schema.pattern is None and schema.enum is None and schema.const is None:
            schema.pattern = SAFE_TEXT_PATTERN
        return
    for member in (*(schema.one_of or ()), *(schema.any_of or ())):
        _safe_strings(member)
    if schema.items is not None:
        _safe_strings(schema.items)
    if isinstance(schema.additional_properties, Schema):  # a map: its keys and its values are text too
        if schema.property_names is None:
            schema.property_names = Schema(type=OpenAPIType.STRING, pattern=SAFE_TEXT_PATTERN)
        if schema.additional_properties == Schema():  # any JSON value: any JSON value of safe text
            schema.additional_properties = Reference(ref=f"#/components/schemas/{SAFE_JSON}")
        else:
            _safe_strings(schema.additional_properties)


SAFE_JSON = "SafeJsonValue"


def safe_json_value() -> Schema:
    """Any JSON value whose strings (object keys included) are safe text: what a free-form
    member of a request (``dict[str, Any]``) may hold."""
    self_ref = Reference(ref=f"#/components/schemas/{SAFE_JSON}")
    text = Schema(type=OpenAPIType.STRING, pattern=SAFE_TEXT_PATTERN)
    return Schema(
        one_of=[
            text,
            Schema(type=OpenAPIType.NUMBER),
            Schema(type=OpenAPIType.BOOLEAN),
            Schema(type=OpenAPIType.NULL),
            Schema(type=OpenAPIType.ARRAY, items=self_ref),
            Schema(type=OpenAPIType.OBJECT, property_names=text, additional_properties=self_ref),
        ],
        title=SAFE_JSON,
        description="Any JSON value without NUL, control characters or lone surrogates in its strings",
    )


def _item_patterns(struct: type) -> dict[str, str]:
    """Patterns of ``list[Annotated[str, Meta(pattern=...)]]`` fields, which Litestar drops."""
    out = {}
    for field in msgspec.inspect.type_info(struct).fields:
        kind = field.type.type if isinstance(field.type, msgspec.inspect.Metadata) else field.type
        if isinstance(kind, msgspec.inspect.ListType) and isinstance(kind.item_type, msgspec.inspect.StrType):
            if kind.item_type.pattern:
                out[field.encode_name] = kind.item_type.pattern
    return out


class RequestContractPlugin(StructSchemaPlugin):
    def to_openapi_schema(self, field_definition: FieldDefinition, schema_creator) -> Schema:  # type: ignore[override]
        schema = super().to_openapi_schema(field_definition, schema_creator)
        config = getattr(field_definition.type_, "__struct_config__", None)
        if config is not None and config.forbid_unknown_fields and isinstance(schema, Schema):
            schema.additional_properties = False
            for name, pattern in _item_patterns(field_definition.type_).items():
                items = schema.properties[name].items  # type: ignore[index,union-attr]
                if isinstance(items, Schema):
                    items.pattern = pattern
            for prop in (schema.properties or {}).values():
                _safe_strings(prop)
        one_of = getattr(field_definition.type_, "__required_one_of__", ())
        if one_of and isinstance(schema, Schema):  # a field and its alias: send exactly one
            schema.one_of = [Schema(required=[name]) for name in one_of]
        return schema



# --- what the generated document cannot say by itself -----------------------------------------------

CHAT_STREAM = "/api/rag/v1/chat/stream"
# SSE event name -> the component schema of its JSON data (chat/sse.py sends exactly these).
STREAM_EVENTS = {"meta": "ChatMeta", "token": "ChatToken", "sources": "ChatSources", "done": "ChatDone",
                 "error": "ChatError"}

# Operation -> links to the operations a client calls next with values from its answer. They are
# the API's workflows (build -> promote -> rollback, answer -> feedback, search -> batch-get), and
# what schemathesis' stateful phase walks.
LINKS: dict[tuple[str, str], dict[str, dict]] = {
    ("/api/rag/v1/internal/index/build", "post"): {
        "PromoteTheBuild": {"operationId": "ApiRagV1InternalIndexPromotePromote", "requestBody": {
            "corpus": "$request.body#/corpus", "index_version": "$response.body#/index_version"}},
        "StatusOfTheCorpus": {"operationId": "ApiRagV1InternalIndexStatusStatus",
                              "parameters": {"corpus": "$request.body#/corpus"}},
    },
    ("/api/rag/v1/internal/index/promote", "post"): {
        "RollBack": {"operationId": "ApiRagV1InternalIndexRollbackRollback",
                     "requestBody": {"corpus": "$response.body#/corpus"}},
        "StatusOfTheCorpus": {"operationId": "ApiRagV1InternalIndexStatusStatus",
                              "parameters": {"corpus": "$response.body#/corpus"}},
    },
    ("/api/rag/v1/search", "post"): {
        "ReadTheFirstResult": {"operationId": "ApiRagV1ChunksBatchGetBatchGet", "requestBody": {
            "chunk_ids": ["$response.body#/results/0/chunk_id"],
            "index_version": "$response.body#/results/0/index_version"}},
    },
    ("/api/rag/v1/chat", "post"): {
        "RateTheAnswer": {"operationId": "ApiRagV1FeedbackSubmit", "requestBody": {
            "request_id": "$response.body#/request_id", "rating": 1}},
    },
}


def _stream_event(name: str, component: str) -> Schema:
    return Schema(
        type=OpenAPIType.OBJECT,
        required=["event", "data"],
        properties={
            "event": Schema(const=name),
            "data": Schema(type=OpenAPIType.STRING, content_media_type="application/json",
                           content_schema=Reference(ref=f"#/components/schemas/{component}")),
            "id": Schema(type=OpenAPIType.STRING),
            "retry": Schema(type=OpenAPIType.INTEGER),
        },
    )


FILES = "/api/rag/v1/files/{corpus}/{path}"


def _file_download(document: OpenAPI) -> None:
    """A file's media type is its own (text/markdown, application/pdf, ...), and Last-Modified is an
    HTTP-date (RFC 9110), not the RFC 3339 date-time Litestar's File response documents."""
    ok = document.paths[FILES].get.responses["200"]  # type: ignore[union-attr,index]
    body = next(iter(ok.content.values()))  # type: ignore[union-attr]
    ok.content = {"*/*": body}  # type: ignore[union-attr]
    last_modified = ok.headers["last-modified"]  # type: ignore[index,union-attr]
    last_modified.schema = Schema(type=OpenAPIType.STRING,
                                  pattern=r"^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$")
    last_modified.description = "When the file last changed, as an HTTP-date (RFC 9110)"


def complete_document(document: OpenAPI) -> None:
    """Add the SSE event envelope of the chat stream, the links between operations, and the
    file download's real media types and headers."""
    _file_download(document)
    document.components.schemas[SAFE_JSON] = safe_json_value()  # type: ignore[index,union-attr]
    stream = document.paths[CHAT_STREAM].post
    assert stream is not None and stream.responses is not None
    sse = stream.responses["200"].content["text/event-stream"]  # type: ignore[union-attr,index]
    sse.schema = Schema(one_of=[_stream_event(name, component) for name, component in STREAM_EVENTS.items()],
                        description="One server-sent event; its data is the JSON object of its event type")
    for (path, method), links in LINKS.items():
        operation = getattr(document.paths[path], method)
        response = operation.responses[str(operation_status(operation))]
        response.links = {name: Link(operation_id=spec["operationId"], parameters=spec.get("parameters"),
                                     request_body=spec.get("requestBody"))
                          for name, spec in links.items()}


def operation_status(operation) -> int:
    return min(int(code) for code in operation.responses if code.isdigit() and code.startswith("2"))
