"""The real edge config (deploy/nginx) under Debian's nginx, on loopback, in front of a stand-in gateway.

`nginx -t` checks the syntax; the rest runs nginx and checks what a client sees: server-sent events
pass unbuffered, request ids are generated or kept, security headers are set, /metrics stays internal,
body limits hold, the widget is served as static files, and nginx's own errors use the gateway's
error body. Without nginx this skips (apt-get install -y nginx-light); in CI (CI=true) it fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from nginx_edge import render_config, running_edge

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.needs_program("nginx")


def nginx_binary() -> str:
    found = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if os.access(p, os.X_OK)), None)
    if found:
        return found
    if os.environ.get("CI") == "true":
        pytest.fail("nginx is required in CI: apt-get install -y nginx-light")
    pytest.skip("nginx is not installed (apt-get install -y nginx-light); CI runs this test")


class StandInGateway(BaseHTTPRequestHandler):
    """Answers like the gateway would, and records what reached it."""

    protocol_version = "HTTP/1.1"
    seen: list[dict[str, Any]] = []
    second_event_sent = threading.Event()
    release_second_event = threading.Event()

    def log_message(self, *args: Any) -> None:  # keep test output clean
        pass

    def _record(self, body: bytes = b"") -> None:
        headers = {key.lower(): value for key, value in self.headers.items()}
        self.seen.append(
            {"method": self.command, "path": self.path, "headers": headers, "body_bytes": len(body)}
        )

    def _reply(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        # A duplicate nginx must hide: it sets its own.
        self.send_header("X-Request-ID", "set-by-upstream")
        # No keep-alive: once the stand-in stops, no pooled connection may still answer for it.
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.close_connection = True

    def do_GET(self) -> None:
        self._record()
        if self.path == "/api/rag/v1/stream":
            self._stream()
        elif self.path.startswith("/api/rag/") or self.path.startswith("/health/"):
            self._reply(200, json.dumps(self.seen[-1]).encode())
        elif self.path.startswith("/widget/"):
            self._reply(200, b"widget-from-gateway", "application/javascript")
        else:
            self._reply(200, b"ragmesh_http_requests_total 1\n", "text/plain")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._record(body)
        self._reply(200, json.dumps({"received": len(body)}).encode())

    def _stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b"data: first\n\n")
        self.wfile.flush()
        # The client releases the second event only after it has read the first; a buffering proxy
        # would hold the first back, the client would never release, and the wait below runs out.
        self.release_second_event.wait(timeout=15)
        self.second_event_sent.set()
        self.wfile.write(b"data: second\n\n")
        self.wfile.flush()
        self.close_connection = True


@pytest.fixture(scope="module")
def gateway() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), StandInGateway)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory, gateway: ThreadingHTTPServer) -> Iterator[str]:
    binary = nginx_binary()
    work = tmp_path_factory.mktemp("edge")
    static_root = work / "html"
    (static_root / "widget").mkdir(parents=True)
    (static_root / "widget/widget.js").write_text("console.log('ragmesh widget');\n")
    with running_edge(binary, work, upstream=f"127.0.0.1:{gateway.server_address[1]}",
                      static_root=static_root) as base:
        yield base


def last_seen(path: str) -> dict[str, Any]:
    return next(entry for entry in reversed(StandInGateway.seen) if entry["path"] == path)


def test_nginx_accepts_the_rendered_config(tmp_path: Path) -> None:
    binary = nginx_binary()
    conf = render_config().render(
        tmp_path / "conf",
        GATEWAY_UPSTREAM="127.0.0.1:9",
        GATEWAY_UPSTREAM_OPTIONS="",
        NGINX_RESOLVER="127.0.0.1",
        NGINX_LISTEN="127.0.0.1:9",
        NGINX_STATIC_ROOT=str(tmp_path),
    )
    result = subprocess.run(
        [binary, "-t", "-p", f"{conf.parent}/", "-c", str(conf), "-e", "stderr"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "test is successful" in result.stderr


def test_every_temp_path_lies_under_the_prefix() -> None:
    # nginx creates each module's temp folder at start, at the path compiled in (Debian's:
    # /var/lib/nginx/<module>) unless the config names one; under a read-only root that mkdir is
    # fatal. Relative paths resolve against -p (/tmp/ in the image, a tmpfs).
    import re

    config = (ROOT / "deploy/nginx/nginx.conf").read_text(encoding="utf-8")
    for module in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        match = re.search(rf"^\s*{module}_temp_path\s+(\S+);", config, re.M)
        assert match, f"nginx.conf leaves {module}_temp_path at the compiled-in default"
        assert not match.group(1).startswith("/"), f"{module}_temp_path {match.group(1)} is outside the prefix"


def test_rendering_leaves_no_template_variable_and_keeps_nginx_variables(tmp_path: Path) -> None:
    conf = render_config().render(tmp_path / "conf")
    (site,) = (conf.parent / "sites").glob("*.conf")
    text = site.read_text()
    assert "${" not in text
    assert "server gateway:8080 max_fails=3 fail_timeout=10s resolve;" in text
    assert "$ragmesh_request_id" in text and "$uri" in text


def test_server_sent_events_reach_the_client_unbuffered(edge: str) -> None:
    with httpx.Client(timeout=20) as client, client.stream("GET", f"{edge}/api/rag/v1/stream") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert "content-encoding" not in response.headers
        lines = response.iter_lines()
        assert next(line for line in lines if line) == "data: first"
        assert not StandInGateway.second_event_sent.is_set(), "nginx held the first event back"
        StandInGateway.release_second_event.set()
        assert next(line for line in lines if line) == "data: second"


def test_a_request_id_is_generated_and_passed_to_the_gateway(edge: str) -> None:
    response = httpx.get(f"{edge}/api/rag/v1/echo")
    assert response.status_code == 200
    request_id = response.headers["x-request-id"]
    assert len(request_id) == 32 and int(request_id, 16) >= 0
    assert response.headers.get_list("x-request-id") == [request_id]  # the upstream's copy is hidden
    headers = last_seen("/api/rag/v1/echo")["headers"]
    assert headers["x-request-id"] == request_id
    assert headers["x-forwarded-for"] == "127.0.0.1"
    assert headers["x-forwarded-proto"] == "http"
    assert headers["host"] == edge.removeprefix("http://")  # with its port: MCP checks it


def test_a_well_formed_client_request_id_is_kept_and_a_malformed_one_replaced(edge: str) -> None:
    kept = httpx.get(f"{edge}/api/rag/v1/echo", headers={"X-Request-ID": "client-1234-abcd"})
    assert kept.headers["x-request-id"] == "client-1234-abcd"
    assert last_seen("/api/rag/v1/echo")["headers"]["x-request-id"] == "client-1234-abcd"
    replaced = httpx.get(f"{edge}/api/rag/v1/echo", headers={"X-Request-ID": "a b;c"})
    assert replaced.headers["x-request-id"] != "a b;c" and len(replaced.headers["x-request-id"]) == 32


def test_api_responses_carry_security_headers(edge: str) -> None:
    headers = httpx.get(f"{edge}/api/rag/v1/echo").headers
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["referrer-policy"] == "strict-origin-when-cross-origin"
    assert "server" not in headers or "/" not in headers["server"]  # no version
    assert "strict-transport-security" not in headers  # plain HTTP: no HSTS
    behind_tls = httpx.get(f"{edge}/api/rag/v1/echo", headers={"X-Forwarded-Proto": "https"}).headers
    assert behind_tls["strict-transport-security"].startswith("max-age=")


def test_metrics_and_unknown_paths_stay_internal(edge: str) -> None:
    before = len(StandInGateway.seen)
    for path in ("/metrics", "/", "/schema", "/api/other"):
        response = httpx.get(f"{edge}{path}")
        assert response.status_code == 404, path
        assert response.json()["code"] == "ROUTE_NOT_FOUND"
        assert response.json()["request_id"] == response.headers["x-request-id"]
    assert len(StandInGateway.seen) == before, "a blocked path reached the gateway"


def test_health_and_mcp_reach_the_gateway(edge: str) -> None:
    assert httpx.get(f"{edge}/health/ready").status_code == 200
    for path in ("/mcp", "/mcp/"):
        response = httpx.post(f"{edge}{path}", content=b'{"jsonrpc":"2.0"}')
        assert response.status_code == 200 and response.json() == {"received": 17}, path


def test_body_limits_answer_413_with_the_gateway_error_body(edge: str) -> None:
    before = len(StandInGateway.seen)
    for path in ("/mcp", "/api/rag/v1/search"):
        too_big = httpx.post(f"{edge}{path}", content=b"x" * (1024 * 1024 + 1))
        assert too_big.status_code == 413, path
        assert too_big.json()["code"] == "BODY_TOO_LARGE"
    assert len(StandInGateway.seen) == before
    # Below the edge limit, the gateway decides (its own limit is smaller and configurable).
    fits = httpx.post(f"{edge}/api/rag/v1/search", content=b"x" * (512 * 1024))
    assert fits.json() == {"received": 512 * 1024}


def test_the_widget_is_served_static_and_may_be_framed(edge: str) -> None:
    before = len(StandInGateway.seen)
    response = httpx.get(f"{edge}/widget/widget.js")
    assert response.status_code == 200 and "ragmesh widget" in response.text
    assert response.headers["content-type"].startswith("application/javascript")
    assert "x-frame-options" not in response.headers
    assert "frame-ancestors *" in response.headers["content-security-policy"]
    assert len(StandInGateway.seen) == before, "a static file was asked of the gateway"
    fallback = httpx.get(f"{edge}/widget/only-on-gateway.js")
    assert fallback.text == "widget-from-gateway"


def test_an_unreachable_gateway_answers_503_with_the_gateway_error_body(
    edge: str, gateway: ThreadingHTTPServer
) -> None:
    # Runs last in this module: it stops the stand-in gateway.
    gateway.shutdown()
    gateway.server_close()
    response = httpx.get(f"{edge}/api/rag/v1/echo", timeout=20)
    assert response.status_code == 503
    assert response.json()["code"] == "UNAVAILABLE"
    assert response.headers["x-content-type-options"] == "nosniff"
