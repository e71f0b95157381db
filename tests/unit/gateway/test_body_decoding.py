"""Strict body decoding: every malformed input maps to one stable error code."""

from __future__ import annotations

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.chat.schemas import ChatRequest
from ragmesh_gateway.search.schemas import BatchGetRequest, SearchRequest
from ragmesh_gateway.web.body import convert_arguments, decode_json


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"query": "a", "bogus": 1}', ErrorCode.UNKNOWN_FIELD),
        (b'{"query": "a", "filters": {"corpus": "x", "colour": 1}}', ErrorCode.UNKNOWN_FIELD),
        (b'{"query": "a"', ErrorCode.MALFORMED_BODY),
        (b"", ErrorCode.MALFORMED_BODY),
        (b"null", ErrorCode.MALFORMED_BODY),
        (b"[1, 2]", ErrorCode.MALFORMED_BODY),
        (b'{"query": "\xff\xfe"}', ErrorCode.MALFORMED_BODY),
        (b'{"query": "\\ud800"}', ErrorCode.INVALID_CHARACTER),
        (b'{"query": "a\\u0000b"}', ErrorCode.INVALID_CHARACTER),
        (b'{"query": "\\ud800', ErrorCode.MALFORMED_BODY),
        (b'{"query": 5}', ErrorCode.MALFORMED_BODY),
        (b'{"query": "a", "top_k": "7"}', ErrorCode.MALFORMED_BODY),
        (b'{"query": "a", "top_k": 7.5}', ErrorCode.MALFORMED_BODY),
        (b'{"query": "a", "include_content": "yes"}', ErrorCode.MALFORMED_BODY),
        (b'{"top_k": 3}', ErrorCode.MALFORMED_BODY),
        (b'{"query": ""}', ErrorCode.QUERY_EMPTY),
        (b'{"query": "' + b"x" * 2001 + b'"}', ErrorCode.QUERY_TOO_LONG),
        (b'{"query": "a", "top_k": 0}', ErrorCode.TOP_K_OUT_OF_RANGE),
        (b'{"query": "a", "top_k": 51}', ErrorCode.TOP_K_OUT_OF_RANGE),
    ],
)
def test_search_request_errors(raw: bytes, code: ErrorCode) -> None:
    with pytest.raises(RagmeshError) as err:
        decode_json(raw, SearchRequest)
    assert err.value.code is code
    assert err.value.http_status == 400


def test_error_messages_name_the_field_not_the_value() -> None:
    with pytest.raises(RagmeshError) as err:
        decode_json(b'{"query": "top secret text", "top_k": "seven"}', SearchRequest)
    assert "top_k" in err.value.message and "seven" not in err.value.message
    assert err.value.details == {"path": "$.top_k"}


def test_chunk_id_limits() -> None:
    ids = [f'"{i}"' for i in range(101)]
    with pytest.raises(RagmeshError) as err:
        decode_json(b'{"chunk_ids": [' + ",".join(ids).encode() + b"]}", BatchGetRequest)
    assert err.value.code is ErrorCode.TOO_MANY_IDS


def test_question_limits_use_the_query_codes() -> None:
    with pytest.raises(RagmeshError) as err:
        decode_json(b'{"question": ""}', ChatRequest)
    assert err.value.code is ErrorCode.QUERY_EMPTY


def test_a_valid_body_decodes() -> None:
    request = decode_json(b'{"query": "q", "top_k": 3, "filters": {"tags": ["a"]}}', SearchRequest)
    assert (request.query, request.top_k, request.filters.tags) == ("q", 3, ["a"])


def test_tool_arguments_follow_the_same_rules() -> None:
    assert convert_arguments({"query": "q"}, SearchRequest).top_k == 8
    with pytest.raises(RagmeshError) as err:
        convert_arguments({"query": "q", "extra": True}, SearchRequest)
    assert err.value.code is ErrorCode.UNKNOWN_FIELD
    with pytest.raises(RagmeshError) as err:
        convert_arguments({"query": "q", "top_k": "3"}, SearchRequest)
    assert err.value.code is ErrorCode.MALFORMED_BODY


def test_integral_floats_are_integers_as_json_schema_says() -> None:
    from ragmesh_gateway.web.body import convert_arguments

    assert decode_json(b'{"query": "a", "top_k": 7.0}', SearchRequest).top_k == 7
    assert convert_arguments({"query": "a", "top_k": 7.0}, SearchRequest).top_k == 7  # MCP tool arguments
    with pytest.raises(RagmeshError) as err:
        convert_arguments({"query": "a\x00", "top_k": 7}, SearchRequest)
    assert err.value.code is ErrorCode.INVALID_CHARACTER
