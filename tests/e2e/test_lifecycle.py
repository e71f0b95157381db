"""`ragmesh up` as a user runs it, with the embedded PostgreSQL and Redis, stopped by Ctrl-C or killed,
then `ragmesh down`: afterwards no process it started runs and no port it used is held (issue 15).

Each test starts one real mesh without a corpus (nothing to embed), so it takes the processes' start
time only; both share one state folder, the second reusing the first one's PostgreSQL data folder.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil
import pytest

from ragmesh_cli.mesh import SERVICES, MeshPorts
from ragmesh_cli.mesh.stores import port_free

pytestmark = pytest.mark.e2e

SERVING = "serving; Ctrl-C to stop"


def _env(state: Path) -> dict[str, str]:
    """A user's shell: no store URL set (the embedded ones are used), only the state folder."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("RAGMESH_POSTGRES_URL", "RAGMESH_REDIS_URL", "RAGMESH_TRACE_FILE")}
    env["RAGMESH_STATE_DIR"] = str(state)
    return env


def ragmesh(state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmesh_cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env=_env(state), stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module")
def state() -> Iterator[Path]:
    # Not pytest's tmp_path (a 0700 folder): as root, the embedded PostgreSQL runs as an unprivileged
    # user that must be able to enter the state folder (tests/integration/test_infra.py).
    path = Path(tempfile.mkdtemp(prefix="ragmesh-lifecycle-"))
    path.chmod(0o755)
    yield path
    ragmesh(path, "down", "--state-dir", str(path))
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class Up:
    process: subprocess.Popen
    log: Path
    ports: MeshPorts
    pids: set[int] = field(default_factory=set)
    held: set[int] = field(default_factory=set)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


def _listening(pid: int) -> set[int]:
    try:
        return {c.laddr.port for c in psutil.Process(pid).net_connections("tcp") if c.status == psutil.CONN_LISTEN}
    except psutil.Error:
        return set()


def start_up(state: Path, logs: Path, *extra: str) -> Up:
    ports = MeshPorts.free_block()
    log = logs / f"up-{time.time_ns()}.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "ragmesh_cli.main", "up", "--state-dir", str(state), "--port-base", str(ports.base),
             *extra],
            stdout=out, stderr=subprocess.STDOUT, env=_env(state), stdin=subprocess.DEVNULL,
        )
    up = Up(process, log, ports)
    deadline = time.monotonic() + 240
    try:
        while SERVING not in up.stderr():
            assert process.poll() is None, f"ragmesh up exited {process.returncode}:\n{up.stderr()}"
            assert time.monotonic() < deadline, up.stderr()
            time.sleep(0.5)
    except BaseException:
        process.kill()  # its children follow it (parent-death signal); the fixture's `down` does the rest
        process.wait()
        raise
    # Everything it started, found from the outside: its children, and the embedded stores (with
    # PostgreSQL's own backends), through the pid files they keep in the state folder.
    up.pids = {p.pid for p in psutil.Process(process.pid).children(recursive=True)}
    for pid_file in (state / "postgres" / "data" / "postmaster.pid", state / "redis" / "redis.pid"):
        pid = int(pid_file.read_text().split()[0])
        up.pids |= {pid} | {p.pid for p in psutil.Process(pid).children(recursive=True)}
    up.held = set().union(*(_listening(pid) for pid in up.pids | {process.pid}))
    expected = {ports.port(s) for s in SERVICES} | {ports.metrics_port(s) for s in SERVICES[1:5]}
    assert expected | {ports.supervisor_metrics_port()} <= up.held, (sorted(up.held), up.stderr())
    return up


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def assert_nothing_left(up: Up) -> None:
    left = [p for p in up.pids if _alive(p)]
    assert not left, f"still running after ragmesh down: {[(p, psutil.Process(p).cmdline()) for p in left]}"
    held = sorted(p for p in up.held if not port_free(p))
    assert not held, f"ports still held after ragmesh down: {held}"


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("up-logs")


def test_ctrl_c_then_down_leaves_no_process_and_no_port(state: Path, logs: Path) -> None:
    up = start_up(state, logs)
    gateway = f"http://127.0.0.1:{up.ports.port('gateway')}"
    try:
        banner = up.stderr()
        # What to do next, said once the mesh serves.
        assert f"{gateway}/widget/" in banner and str(state / "logs") in banner, banner
        assert f"127.0.0.1:{up.ports.metrics_port('retrieval')}/metrics" in banner, banner
        assert "no corpus is served yet" in banner and "ragmesh index ci --corpus" in banner, banner
        assert f"ragmesh down --state-dir {state}" in banner, banner
        # The gateway's root points at the widget and the API instead of answering ROUTE_NOT_FOUND.
        root = httpx.get(gateway + "/", headers={"Accept": "application/json"}, timeout=10)
        assert root.status_code == 200 and root.json()["widget"] == "/widget/", root.text
        # Admin commands find the embedded PostgreSQL from the state folder alone.
        created = ragmesh(state, "token", "create", "--client", "newcomer", "--scope", "rag:search")
        assert created.returncode == 0, created.stderr
        assert json.loads(created.stdout)["client_id"] == "newcomer"
        listed = ragmesh(state, "token", "list")
        assert [t["client_id"] for t in json.loads(listed.stdout)["tokens"]] == ["newcomer"], listed.stderr
        # A second `ragmesh up` on the same folder is refused before it starts anything.
        second = ragmesh(state, "up", "--state-dir", str(state), "--port-base", str(up.ports.base), timeout=60)
        assert second.returncode == 5 and "another `ragmesh up`" in second.stderr, second.stderr
    finally:
        up.process.send_signal(signal.SIGINT)  # what Ctrl-C in its terminal sends
        assert up.process.wait(timeout=120) == 0, up.stderr()
    # The embedded stores outlive Ctrl-C (the next `up` reuses them), and that is said.
    assert "keep running" in up.stderr() and f"ragmesh down --state-dir {state}" in up.stderr()
    down = ragmesh(state, "down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr
    assert {s["name"] for s in json.loads(down.stdout)["stopped"]} >= {"postgres", "redis"}, down.stdout
    assert_nothing_left(up)


def test_sigkill_then_down_leaves_no_process_and_no_port(state: Path, logs: Path) -> None:
    up = start_up(state, logs)
    served = ragmesh(state, "corpora")  # found through the state folder's record, on --port-base ports
    up.process.kill()
    up.process.wait()
    # The record of a mesh that is gone: one line saying so (main went to the default port instead).
    gone = ragmesh(state, "search", "q")
    down = ragmesh(state, "down", "--state-dir", str(state))
    assert served.returncode == 0, served.stderr
    assert gone.returncode == 5 and "is gone" in gone.stderr and "Traceback" not in gone.stderr, gone.stderr
    assert len(gone.stderr.strip().splitlines()) == 1, gone.stderr
    assert down.returncode == 0, down.stderr
    assert "redis" in {s["name"] for s in json.loads(down.stdout)["stopped"]}, down.stdout
    assert_nothing_left(up)
    again = ragmesh(state, "down", "--state-dir", str(state))
    assert again.returncode == 0 and "nothing was running" in again.stderr, again.stderr


def test_up_with_tokens_on_checks_them_and_prints_an_admin_token_once(state: Path, logs: Path) -> None:
    # main: tokens were never checked by the embedded mesh (`--token bogus` got 200), and `up` had no
    # way to turn them on.
    import re

    up = start_up(state, logs, "--auth", "tokens")
    try:
        tokens = re.findall(r"export RAGMESH_TOKEN=(rmk_[0-9a-f]{16}_[A-Za-z0-9_-]+)", up.stderr())
        forged = ragmesh(state, "corpora", "--token", "rmk_0123456789abcdef_" + "x" * 43)
        admin = ragmesh(state, "corpora", "--token", tokens[0] if tokens else "")
        listed = ragmesh(state, "token", "list", "--client", "ragmesh-up-admin")
    finally:
        up.process.send_signal(signal.SIGINT)
        assert up.process.wait(timeout=120) == 0, up.stderr()
    assert len(tokens) == 1, up.stderr()
    assert forged.returncode == 3 and "UNAUTHENTICATED" in forged.stderr, forged.stderr
    assert admin.returncode == 0, admin.stderr
    assert [t["scopes"] for t in json.loads(listed.stdout)["tokens"]][-1] == ["rag:admin"], listed.stdout
    assert tokens[0] not in (state / "logs" / "gateway.log").read_text(errors="replace")
    down = ragmesh(state, "down", "--state-dir", str(state))
    assert down.returncode == 0, down.stderr
    assert_nothing_left(up)
