"""The request's server span says how the request ended (issue 23, Build 7): ERROR with a
description for a server failure or a degraded answer, the degraded flags as an attribute, nothing on
a whole answer. Before: only a child span (Generation/Generate) said ERROR, the root span said ok."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind, Status, StatusCode

from ragmesh_common.telemetry import (
    DEGRADED_ATTRIBUTE,
    ERROR_TYPE_ATTRIBUTE,
    bind_request_span,
    mark_request_degraded,
    mark_request_failed,
    settle_request_span,
)


@pytest.fixture
def root() -> Iterator:
    """A server span bound as the request's, in a context of its own (as each request's task is)."""
    span = TracerProvider().get_tracer("test").start_span("POST /api/rag/v1/chat", kind=SpanKind.SERVER)
    context = contextvars.copy_context()
    context.run(bind_request_span, span)
    span.run = context.run  # type: ignore[attr-defined]
    yield span
    span.end()


def test_a_whole_answer_leaves_the_span_alone(root) -> None:
    root.run(mark_request_degraded, [])
    root.run(settle_request_span)
    assert root.status.status_code is StatusCode.UNSET
    assert DEGRADED_ATTRIBUTE not in root.attributes and ERROR_TYPE_ATTRIBUTE not in root.attributes


def test_a_degraded_answer_is_an_error_naming_its_flags(root) -> None:
    root.run(mark_request_degraded, ["rerank"])
    root.run(mark_request_degraded, ["rerank", "generation"])  # the terminal event repeats search's flags
    assert (root.status.status_code, root.status.description) == (StatusCode.ERROR, "degraded: rerank, generation")
    assert root.attributes[DEGRADED_ATTRIBUTE] == ("rerank", "generation")
    assert root.attributes[ERROR_TYPE_ATTRIBUTE] == "degraded"


def test_a_failure_wins_over_degraded_flags_and_keeps_them(root) -> None:
    root.run(mark_request_degraded, ["generation"])
    root.run(mark_request_failed, "RUNTIME_ERROR", "the model runtime failed")
    assert (root.status.status_code, root.status.description) == (
        StatusCode.ERROR, "RUNTIME_ERROR: the model runtime failed")
    assert root.attributes[ERROR_TYPE_ATTRIBUTE] == "RUNTIME_ERROR"
    assert root.attributes[DEGRADED_ATTRIBUTE] == ("generation",)


def test_a_callers_mistake_is_named_but_not_a_server_error(root) -> None:
    root.run(lambda: mark_request_failed("QUERY_EMPTY", "question is empty", server_fault=False))
    assert root.status.status_code is StatusCode.UNSET
    assert root.attributes[ERROR_TYPE_ATTRIBUTE] == "QUERY_EMPTY"


def test_the_description_survives_the_instrumentation_setting_the_status_from_a_5xx(root) -> None:
    root.run(mark_request_failed, "UNAVAILABLE", "retrieval is unavailable")
    root.set_status(Status(StatusCode.ERROR))  # what opentelemetry-instrumentation-asgi does on a 503
    root.run(settle_request_span)  # the gateway's send wrapper, as the response starts
    assert (root.status.status_code, root.status.description) == (
        StatusCode.ERROR, "UNAVAILABLE: retrieval is unavailable")


def test_marks_outside_a_bound_request_do_nothing() -> None:
    span = TracerProvider().get_tracer("test").start_span("elsewhere")
    contextvars.copy_context().run(bind_request_span, span)  # bound in another request's context only
    mark_request_degraded(["generation"])
    mark_request_failed("INTERNAL", "internal error")
    settle_request_span()
    assert span.status.status_code is StatusCode.UNSET and not span.attributes
