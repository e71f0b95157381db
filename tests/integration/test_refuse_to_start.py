"""A service missing a setting it needs refuses to start, naming the variable; it never runs half-configured.

Each case starts the real process (``python -m ragmesh_<service>``, as the containers do) with one
variable missing, unreadable or malformed, and expects: a non-zero exit well within the timeout,
the variable's name on stderr, no Python traceback (an operator reads a message, not a stack), and
nothing listening on the port it was given. Controls start the same processes with the variable
set, so the missing variable is what stopped them.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from ragmesh_bench.harness import NotServing, free_port, serve_on_free_port
from ragmesh_cli.mesh.lifecycle import stop_process
from ragmesh_common.healthcheck import check_grpc, check_http

STARTUP_TIMEOUT_S = 60  # a refusal comes after the imports, long before this


@dataclass(frozen=True)
class Case:
    service: str
    env: dict[str, str]
    names: str  # the variable stderr must name
    why: str
    extra: dict[str, str] = field(default_factory=dict)


MISSING = "/nonexistent/ragmesh/secret"
CASES = [
    Case("indexer", {}, "RAGMESH_POSTGRES_URL", "the registry lives in PostgreSQL"),
    Case("indexer", {"RAGMESH_POSTGRES_URL_FILE": MISSING}, "RAGMESH_POSTGRES_URL_FILE", "a secret file that is not there"),
    Case("gateway", {"RAGMESH_AUTH_MODE": "tokens"}, "RAGMESH_POSTGRES_URL", "tokens live in PostgreSQL"),
    Case("gateway", {"RAGMESH_AUTH_MODE": "tokens", "RAGMESH_POSTGRES_URL_FILE": MISSING},
         "RAGMESH_POSTGRES_URL_FILE", "a secret file that is not there"),
    Case("gateway", {"RAGMESH_RATE_LIMITS": "*=5/10"}, "RAGMESH_REDIS_URL", "rate-limit buckets live in Redis"),
    Case("gateway", {"RAGMESH_REDIS_URL": "redis://127.0.0.1:6379/15", "RAGMESH_RATE_LIMITS": "search=fast"},
         "RAGMESH_RATE_LIMITS", "a malformed limit"),
    Case("gateway", {"RAGMESH_AUTH_MODE": "token"}, "RAGMESH_AUTH_MODE", "a misspelled mode"),
    Case("gateway", {"RAGMESH_CHAT_INCLUDE_CONTENT": "maybe"}, "RAGMESH_CHAT_INCLUDE_CONTENT", "not a boolean"),
    Case("retrieval", {"RAGMESH_VECTOR_STORE": "server"}, "RAGMESH_QDRANT_URL", "a Qdrant server without its URL"),
    Case("retrieval", {"RAGMESH_QDRANT_API_KEY_FILE": MISSING, "RAGMESH_QDRANT_URL": "http://127.0.0.1:9"},
         "RAGMESH_QDRANT_API_KEY_FILE", "a secret file that is not there"),
    Case("generation", {"RAGMESH_LLM_API_KEY_FILE": MISSING}, "RAGMESH_LLM_API_KEY_FILE",
         "a secret file that is not there"),
    Case("rerank", {"RAGMESH_RERANK_METRICS_PORT": "ninety"}, "RAGMESH_RERANK_METRICS_PORT", "not a number"),
    Case("runtime", {"RAGMESH_RUNTIME_RERANK_METHOD": "psychic"}, "RAGMESH_RUNTIME_RERANK_METHOD", "an unknown method"),
]


def listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def base_env(tmp_path: Path) -> dict[str, str]:
    """The caller's environment without any RAGMESH_* setting, with private state and free ports."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAGMESH_")}
    env["RAGMESH_STATE_DIR"] = str(tmp_path / "state")
    env["PYTHONUNBUFFERED"] = "1"
    # Nothing may bind the default ports of a developer's running mesh.
    for service in ("retrieval", "rerank", "generation", "indexer"):
        env[f"RAGMESH_{service.upper()}_METRICS_PORT"] = str(free_port())
    return env


def command(service: str, port: int) -> list[str]:
    return [sys.executable, "-m", f"ragmesh_{service}", "--port", str(port)]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.service}-{c.names}-{c.why.replace(' ', '_')}")
def test_a_service_refuses_to_start_naming_the_variable(case: Case, tmp_path: Path) -> None:
    port = free_port()
    env = {**base_env(tmp_path), **case.env}
    started = time.monotonic()
    done = subprocess.run(command(case.service, port), env=env, capture_output=True, text=True,
                          timeout=STARTUP_TIMEOUT_S)
    assert done.returncode != 0, f"{case.service} started without {case.names}:\n{done.stderr[-2000:]}"
    assert case.names in done.stderr, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-4000:]
    assert not listening(port), f"{case.service} left something listening on {port}"
    print(f"{case.service} refused in {time.monotonic() - started:.1f}s: {done.stderr.strip().splitlines()[-1]}")


def _start_and_wait(service: str, env: dict[str, str], healthy, log: Path) -> None:
    """The service becomes healthy on a free port, answering from that very process (another
    test's server can take the port first: ragmesh_bench.harness.serve_on_free_port)."""

    def start(port: int) -> subprocess.Popen:
        with log.open("ab") as out:
            return subprocess.Popen(command(service, port), env=env, stdout=out, stderr=subprocess.STDOUT)

    try:
        _, process = serve_on_free_port(start, healthy, timeout=STARTUP_TIMEOUT_S)
    except NotServing as exc:
        pytest.fail(f"{service}: {exc}\n{log.read_text(errors='replace')[-2000:]}")
    stop_process(process.pid, timeout=15.0)
    process.wait()


def test_control_the_indexer_starts_with_its_database(tmp_path: Path, pg_url: str) -> None:
    env = {**base_env(tmp_path), "RAGMESH_POSTGRES_URL": pg_url,
           "RAGMESH_INDEXER_PG_SCHEMA": f"refuse_{os.getpid()}_{time.time_ns() % 10**8}"}
    _start_and_wait("indexer", env, lambda port: check_grpc(f"127.0.0.1:{port}", timeout=1), tmp_path / "indexer.log")


def test_control_the_gateway_starts_with_tokens_and_rate_limits(
    tmp_path: Path, pg_url: str, redis_url: str
) -> None:
    secret = tmp_path / "postgres_url"
    secret.write_text(pg_url + "\n", encoding="utf-8")
    env = {**base_env(tmp_path), "RAGMESH_AUTH_MODE": "tokens", "RAGMESH_POSTGRES_URL_FILE": str(secret),
           "RAGMESH_RATE_LIMITS": "*=5/10", "RAGMESH_REDIS_URL": redis_url}
    _start_and_wait("gateway", env, lambda port: check_http(f"http://127.0.0.1:{port}/health/live", timeout=1),
                    tmp_path / "gateway.log")
