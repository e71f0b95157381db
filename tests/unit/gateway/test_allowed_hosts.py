"""The Host check every gateway route runs first: exact names, ``name:*`` with any port, probes exempt."""

from __future__ import annotations

import asyncio

import pytest

from ragmesh_gateway.web.allowed_hosts import AllowedHosts


async def _ok(scope, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


def status_for(host: bytes | None, path: str = "/api/rag/v1/search",
               patterns: tuple[str, ...] = ("127.0.0.1:*", "rag.example.com")) -> int:
    sent: list[dict] = []
    headers = [(b"host", host)] if host is not None else []
    scope = {"type": "http", "method": "POST", "path": path, "headers": headers, "state": {}}

    async def send(message) -> None:
        sent.append(message)

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    asyncio.run(AllowedHosts(_ok, list(patterns))(scope, receive, send))
    return sent[0]["status"]


@pytest.mark.parametrize("host", [b"rag.example.com", b"127.0.0.1:8080", b"127.0.0.1:1"])
def test_configured_names_are_answered(host: bytes) -> None:
    assert status_for(host) == 200


@pytest.mark.parametrize("host", [b"evil.example", b"rag.example.com:8080", b"127.0.0.1", b"127.0.0.10:80", b"", None])
def test_other_names_a_bare_wildcard_name_and_no_host_are_misdirected(host: bytes | None) -> None:
    assert status_for(host) == 421


def test_probes_are_answered_whatever_the_host() -> None:
    assert status_for(b"10.0.0.7:8080", path="/health/ready") == 200


def test_no_configured_name_answers_nobody() -> None:
    assert status_for(b"127.0.0.1:8080", patterns=()) == 421
