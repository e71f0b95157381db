"""Schemathesis over TEI's own OpenAPI document against the runtime: every answer must be one TEI
documents for that operation (status code, content type and body schema), for generated valid and
invalid requests alike. The document is TEI's, vendored unchanged (tests/conformance/tei/).

Bounded (``EXAMPLES`` per operation, no shrinking): the models do real work for every case.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is not installed")
from hypothesis import HealthCheck, settings  # noqa: E402 - schemathesis brings hypothesis
from schemathesis import GenerationMode  # noqa: E402
from schemathesis.checks import not_a_server_error  # noqa: E402
from schemathesis.specs.openapi.checks import (  # noqa: E402
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from loopback_server import serve_in_thread  # noqa: E402
from tei_spec import document  # noqa: E402

from ragmesh_runtime.app import create_app  # noqa: E402
from ragmesh_runtime.settings import RuntimeSettings  # noqa: E402

EXAMPLES = 12
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

SCHEMA = schemathesis.openapi.from_dict(document())
SCHEMA.config.generation.update(
    modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=EXAMPLES, no_shrink=True
)


@pytest.fixture(scope="module")
def runtime_url(runtime_models) -> Iterator[str]:
    with serve_in_thread(create_app(RuntimeSettings(), runtime_models)) as url:
        yield url


@SCHEMA.parametrize()
@settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=EXAMPLES)
def test_every_answer_is_one_tei_documents(case, runtime_url: str, caplog) -> None:
    caplog.set_level(logging.ERROR, logger="ragmesh_runtime")
    response = case.call(base_url=runtime_url, timeout=30)
    case.validate_response(response, checks=CHECKS)
    # 424 Backend is documented for most operations, so a crash would conform: the log says if one happened.
    assert not [r for r in caplog.records if r.name == "ragmesh_runtime" and r.levelno >= logging.ERROR], (
        case.method, case.path, [r.getMessage() for r in caplog.records])
