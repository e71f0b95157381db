"""The real edge: Debian's nginx with deploy/nginx's config, in front of the real mesh, on loopback.

A search and a streamed chat go through ``/api/rag/`` exactly as clients send them in production.
The stream must not be buffered: each request is also sent straight to the gateway, and the events
must arrive through nginx spread over time the way they leave the gateway (a buffering proxy holds
them back and delivers them together at the end). Only relative timings are compared: nginx against
the same request sent direct, never a fixed number of milliseconds.

Without nginx this skips (apt-get install -y nginx-light); in CI (CI=true) it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from nginx_edge import running_edge

pytestmark = [pytest.mark.e2e, pytest.mark.needs_program("nginx")]

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What is the default queue depth of the Quokka scheduler?"
PAIRS = 6


@pytest.fixture(scope="session")
def nginx_binary(pytestconfig: pytest.Config) -> str:
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if not found:
        # tests/conftest.py as pytest loaded it (several conftest modules share the name).
        root_conftest = pytestconfig.pluginmanager.getplugin(str(ROOT / "tests" / "conftest.py"))
        root_conftest.skip_or_fail("nginx is not installed (apt-get install -y nginx-light)")
    return found


@pytest.fixture(scope="module")
def edge(nginx_binary: str, mesh, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = nginx_binary
    work = tmp_path_factory.mktemp("edge")
    (work / "html").mkdir()
    with running_edge(binary, work, upstream=mesh.gateway_url.removeprefix("http://"),
                      static_root=work / "html") as base:
        yield base


@dataclass
class TimedStream:
    status: int
    headers: httpx.Headers
    events: list[tuple[float, str, dict]]  # (seconds since the request was sent, event, data)
    total: float

    @property
    def names(self) -> list[str]:
        return [name for _, name, _ in self.events]

    @property
    def answer(self) -> str:
        return "".join(data["text"] for _, name, data in self.events if name == "token")

    def first(self, name: str | None = None) -> float:
        return next(at for at, event, _ in self.events if name is None or event == name)


def timed_chat(base: str) -> TimedStream:
    events: list[tuple[float, str, dict]] = []
    with httpx.Client(timeout=120) as client:
        started = time.perf_counter()
        with client.stream("POST", f"{base}/api/rag/v1/chat/stream", json={"question": QUESTION}) as response:
            name = None
            for line in response.iter_lines():
                if line.startswith("event:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and name:
                    events.append((time.perf_counter() - started, name, json.loads(line.split(":", 1)[1])))
                    name = None
            total = time.perf_counter() - started
            return TimedStream(response.status_code, response.headers, events, total)


# Each test names nginx_binary before mesh: without nginx it skips before the mesh starts.
def test_a_search_passes_through_nginx(nginx_binary: str, mesh, edge: str) -> None:
    body = {"query": "What is the default queue depth of the scheduler?", "top_k": 5}
    direct = httpx.post(f"{mesh.gateway_url}/api/rag/v1/search", json=body, timeout=60)
    proxied = httpx.post(f"{edge}/api/rag/v1/search", json=body, timeout=60,
                         headers={"X-Request-ID": "edge-search-0001"})
    assert direct.status_code == proxied.status_code == 200, proxied.text
    assert [r["chunk_id"] for r in proxied.json()["results"]] == [r["chunk_id"] for r in direct.json()["results"]]
    # nginx keeps a well-formed client request id and adds its security headers.
    assert proxied.headers["x-request-id"] == "edge-search-0001"
    assert proxied.headers["x-content-type-options"] == "nosniff"


def test_a_streamed_chat_passes_through_nginx_as_it_is_written(nginx_binary: str, mesh, edge: str) -> None:
    # Warm both paths first: the first answer to a question pays for model warm-up and fills caches,
    # which would make whichever path runs second look faster. Then alternate, warm against warm.
    timed_chat(mesh.gateway_url)
    timed_chat(edge)
    pairs = [(timed_chat(mesh.gateway_url), timed_chat(edge)) for _ in range(PAIRS)]
    for direct, proxied in pairs:
        assert direct.status == proxied.status == 200
        assert proxied.headers["content-type"].startswith("text/event-stream")
        assert "content-encoding" not in proxied.headers  # compressing a stream would buffer it
        assert proxied.names == direct.names and proxied.names[0] == "meta" and proxied.names[-1] == "done"
        assert "token" in proxied.names and proxied.answer == direct.answer

    # How long the gateway takes from its first event to its last, measured without nginx. Through a
    # buffering proxy the first event arrives together with the last (a spread near 0); through nginx
    # the spread must survive. Summed over the pairs, so scheduling noise of one run cannot decide.
    direct_spread = sum(direct.first("done") - direct.first() for direct, _ in pairs)
    proxied_spread = sum(proxied.first("done") - proxied.first() for _, proxied in pairs)
    direct_first = sum(direct.first() for direct, _ in pairs)
    proxied_first = sum(proxied.first() for _, proxied in pairs)
    direct_total = sum(direct.total for direct, _ in pairs)
    print(f"\nover {PAIRS} warm answers: first event direct {direct_first * 1000:.0f} ms, "
          f"nginx {proxied_first * 1000:.0f} ms; first event to done direct {direct_spread * 1000:.0f} ms, "
          f"nginx {proxied_spread * 1000:.0f} ms; whole streams direct {direct_total * 1000:.0f} ms")
    assert direct_spread > 0, "the gateway wrote every stream at once; nothing to compare"
    assert proxied_spread >= 0.5 * direct_spread, (proxied_spread, direct_spread)
    # And nginx adds less delay before the first event than the whole direct streams took.
    assert proxied_first - direct_first <= direct_total, (proxied_first, direct_first, direct_total)
