"""Tracing setup in a process whose image lacks some client libraries (each image installs only what
its process imports: rerank has neither asyncpg nor redis)."""

from __future__ import annotations

import sys

import pytest

from ragmesh_common import telemetry


@pytest.fixture
def fresh_instrumentation(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(telemetry, "_clients_instrumented", False)
    yield
    from opentelemetry.instrumentation.aiohttp_client import AioHttpClientInstrumentor
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
    from opentelemetry.instrumentation.redis import RedisInstrumentor

    for instrumentor in (HTTPXClientInstrumentor(), AioHttpClientInstrumentor(), RedisInstrumentor()):
        if instrumentor.is_instrumented_by_opentelemetry:
            instrumentor.uninstrument()


def test_a_client_library_that_is_not_installed_is_skipped(monkeypatch, fresh_instrumentation) -> None:
    # A None entry makes `import asyncpg` fail as it does where the package is absent.
    monkeypatch.setitem(sys.modules, "asyncpg", None)
    monkeypatch.delitem(sys.modules, "opentelemetry.instrumentation.asyncpg", raising=False)
    telemetry.instrument_clients()
    assert "opentelemetry.instrumentation.asyncpg" not in sys.modules
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    assert HTTPXClientInstrumentor().is_instrumented_by_opentelemetry  # the ones present still are
