"""The gateway as OS processes: replicas share one Redis rate-limit budget. (Refusing to start
half-configured, e.g. tokens without RAGMESH_POSTGRES_URL, is tests/integration/test_refuse_to_start.py.)

The rate-limited route is GET /corpora with no corpus served and retrieval unreachable: an admitted
request answers an empty list without any downstream call, so the limiter, not the backend, is what
the load measures.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psutil
import pytest

import gateway_process
from gateway_process import free_port, gateway_env, running_gateway

CORPORA = "/api/rag/v1/corpora"


async def hammer(urls: list[str], *, seconds: float,
                 concurrency: int) -> tuple[dict[str, dict[int, int]], float]:
    """Keep-alive GETs from ``concurrency`` connections per URL for ``seconds``: statuses per URL, and
    the seconds from the first answer to the last (the window the budget refilled over: on a starved
    machine the first answers can come well after the window opened).

    Plain HTTP/1.1 over asyncio streams: a full HTTP client costs more CPU per request than the
    gateway does, and on a small machine the load generator would then set the pace. Every
    connection is open before the window starts, so the window is all requests.
    """
    counts: dict[str, dict[int, int]] = {url: {} for url in urls}
    answered_at: list[float] = []
    connections = []
    for url in urls:
        host, port = urlsplit(url).hostname, urlsplit(url).port
        for _ in range(concurrency):
            connections.append((url, f"{host}:{port}", *await asyncio.open_connection(host, port)))
    end_at = time.monotonic() + seconds

    async def run(url: str, host: str, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = f"GET {CORPORA} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
        try:
            while time.monotonic() < end_at:
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                status = int(head.split(b" ", 2)[1])
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                counts[url][status] = counts[url].get(status, 0) + 1
                answered_at.append(time.monotonic())
        finally:
            writer.close()

    await asyncio.gather(*(run(*connection) for connection in connections))
    return counts, max(answered_at) - min(answered_at)


async def test_two_gateway_processes_share_one_budget(tmp_path: Path, redis_url: str) -> None:
    rate, burst, seconds = 50.0, 30, 8.0
    env = gateway_env(
        RAGMESH_REDIS_URL=redis_url,
        RAGMESH_RATE_LIMITS=f"read={rate}/{burst}",
        RAGMESH_RATE_LIMIT_PREFIX=f"ragmesh:test:{uuid.uuid4().hex[:12]}",
        RAGMESH_RATE_LIMIT_FAIL_OPEN="false",  # a Redis failure must show up, not pass as admitted
        RAGMESH_RETRIEVAL_ADDR=f"127.0.0.1:{free_port()}",  # nothing listens: no corpus, no call
    )
    with running_gateway(tmp_path, env, name="a") as first, running_gateway(tmp_path, env, name="b") as second:
        async with httpx.AsyncClient() as http:
            # Open each process's Redis connection on another sender's bucket (a token is a sender).
            for gateway in (first, second):
                warm = await http.get(gateway.url + CORPORA, headers={"Authorization": "Bearer warm-up"})
                assert warm.status_code == 200, warm.text
        counts, window = await hammer([first.url, second.url], seconds=seconds, concurrency=4)

    admitted = {url: c.get(200, 0) for url, c in counts.items()}
    refused = {url: c.get(429, 0) for url, c in counts.items()}
    # 503: the limiter's Redis call missed its 0.5 s deadline on a starved machine (fail closed).
    unavailable = sum(c.get(503, 0) for c in counts.values())
    others = {url: {s: n for s, n in c.items() if s not in (200, 429, 503)} for url, c in counts.items()}
    total_admitted = sum(admitted.values())
    # The bucket starts full and refills from its first use on (a fresh sender's bucket).
    expected = burst + rate * window
    print(f"admitted={total_admitted} expected={expected:.1f} window={window:.2f}s per_process={admitted} "
          f"refused={refused} unavailable={unavailable}")
    assert all(not o for o in others.values()), others
    assert unavailable <= 0.01 * sum(sum(c.values()) for c in counts.values())
    assert all(n > 0 for n in admitted.values()), admitted  # both replicas really served from it
    assert sum(refused.values()) > total_admitted  # demand was far above the budget
    assert abs(total_admitted - expected) <= 0.02 * expected, (total_admitted, expected)


class Live(BaseHTTPRequestHandler):
    """Another server answering like a gateway: 200 to everything."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def test_a_port_taken_before_the_gateway_binds_it_is_given_up_for_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chosen port is only free when chosen: another test's gateway can bind it first. The one
    started here then fails to bind, and the other answers in its place (seen in CI: a search with
    this test's token answered by another test's gateway, with that test's documents)."""
    stranger = HTTPServer(("127.0.0.1", 0), Live)
    threading.Thread(target=stranger.serve_forever, daemon=True).start()
    handed = iter([stranger.server_port])
    monkeypatch.setattr(gateway_process, "free_port", lambda: next(handed, None) or free_port())
    env = gateway_env(RAGMESH_RETRIEVAL_ADDR=f"127.0.0.1:{free_port()}")  # nothing listens: no corpus
    try:
        with running_gateway(tmp_path, env) as gateway:
            port = urlsplit(gateway.url).port
            assert port != stranger.server_port
            listening = {c.laddr.port for c in psutil.Process(gateway.process.pid).net_connections(kind="tcp")
                         if c.status == psutil.CONN_LISTEN}
            assert port in listening, (port, listening)
    finally:
        stranger.shutdown()
        stranger.server_close()
