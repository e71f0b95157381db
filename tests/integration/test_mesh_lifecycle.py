"""`ragmesh up|down` before anything serves: what they refuse, what they recover from, and that a
stranger on a mesh port is never taken for a process of ours (issue 15, Build 1).

No model is loaded here: a busy port and a foreign folder are refused before anything starts, and the
ownership check runs against sleeper children started through the real ``Mesh.start_one``. The
whole lifecycle with the real mesh is tests/e2e/test_lifecycle.py.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from ragmesh_cli.mesh import Mesh, MeshPorts

USAGE, UNAVAILABLE = 2, 5


def ragmesh(*args: str, env: dict[str, str] | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmesh_cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


class Sleepers(Mesh):
    """Children that run but never listen: whatever answers on their ports is someone else."""

    def command(self, svc: str) -> list[str]:
        return [sys.executable, "-c", "import time; time.sleep(600)"]


@pytest.fixture
def stranger_http(free_port) -> Iterator[int]:
    """Another program's HTTP server answering 200 on every path, as a stale gateway would."""

    class Ok(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            body = b'{"status":"ok"}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    port = free_port()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Ok)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield port
    server.shutdown()
    server.server_close()


@pytest.fixture
def stranger_grpc(free_port) -> Iterator[int]:
    """Another program's gRPC server reporting SERVING, as a stale retrieval would."""
    port = free_port()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    yield port
    server.stop(0)


@pytest.mark.parametrize("svc, stranger", [("gateway", "stranger_http"), ("retrieval", "stranger_grpc")])
def test_a_stranger_answering_on_a_mesh_port_is_never_taken_for_ours(
    tmp_path: Path, svc: str, stranger: str, request: pytest.FixtureRequest
) -> None:
    port = request.getfixturevalue(stranger)
    from ragmesh_cli.mesh import SERVICES

    mesh = Sleepers(state_dir=tmp_path, ports=MeshPorts(port - SERVICES.index(svc)))
    assert mesh.ports.port(svc) == port
    mesh.start_one(svc)
    try:
        assert not mesh.is_healthy(svc), "a health answer from another process was taken for ours"
        with pytest.raises(RuntimeError) as refused:
            mesh.wait_ready(svc, timeout=20)
        message = str(refused.value)
        assert f"port {port}" in message and f"pid {os.getpid()}" in message, message
        assert f"not the {svc} this mesh started (pid {mesh.processes[svc].pid})" in message, message
    finally:
        mesh.stop()


def _held(port: int) -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    sock.listen()
    return sock


def test_a_busy_port_is_refused_before_anything_starts(tmp_path: Path) -> None:
    ports = MeshPorts.free_block()
    state = tmp_path / "state"
    busy = ports.port("rerank")
    with _held(busy):
        up = ragmesh("up", "--state-dir", str(state), "--port-base", str(ports.base),
                     env={"RAGMESH_POSTGRES_URL": "", "RAGMESH_REDIS_URL": ""})
    assert up.returncode == UNAVAILABLE, up.stderr
    assert f"port {busy} (rerank) is in use by pid {os.getpid()}" in up.stderr, up.stderr
    assert "nothing was started" in up.stderr and "Traceback" not in up.stderr
    # Nothing started: no embedded store, no service log.
    assert not (state / "postgres").exists() and not (state / "redis").exists() and not (state / "logs").exists()


def test_a_busy_metrics_port_is_refused_too(tmp_path: Path) -> None:
    ports = MeshPorts.free_block()
    busy = ports.metrics_port("indexer")
    with _held(busy):
        up = ragmesh("up", "--state-dir", str(tmp_path / "state"), "--port-base", str(ports.base))
    assert up.returncode == UNAVAILABLE and f"port {busy} (indexer metrics) is in use" in up.stderr, up.stderr


@pytest.mark.parametrize("command", ["up", "down"])
def test_a_folder_that_is_not_ragmesh_state_is_refused_and_left_alone(tmp_path: Path, command: str) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "holiday.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    done = ragmesh(command, "--state-dir", str(folder))
    assert done.returncode == USAGE, done.stderr
    assert f"{folder} is not a ragmesh state folder" in done.stderr and "Traceback" not in done.stderr
    assert sorted(p.name for p in folder.iterdir()) == ["holiday.jpg"]


def test_down_on_a_folder_that_does_not_exist_says_so(tmp_path: Path) -> None:
    done = ragmesh("down", "--state-dir", str(tmp_path / "nowhere"))
    assert done.returncode == USAGE and "no state folder" in done.stderr, done.stderr
    assert not (tmp_path / "nowhere").exists()


def _record(state: Path, children: dict[str, dict]) -> None:
    """A record of started processes as `ragmesh up` leaves it (written by ragmesh_cli.mesh.lifecycle)."""
    from ragmesh_cli.mesh.lifecycle import StateFolder

    folder = StateFolder(state)
    folder.claim()
    folder.write_record({"supervisor": None, "children": children})


def test_a_stale_record_never_stops_a_stranger_and_is_cleared(tmp_path: Path) -> None:
    import psutil

    state = tmp_path / "state"
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    try:
        started = psutil.Process(stranger.pid).create_time()
        # The pid now belongs to another program (another start time), and a pid nobody holds.
        _record(state, {"gateway": {"pid": stranger.pid, "started": started - 3600.0},
                        "rerank": {"pid": gone.pid, "started": started}})
        down = ragmesh("down", "--state-dir", str(state))
        assert down.returncode == 0, down.stderr
        assert alive(stranger.pid), "ragmesh down stopped a process it did not start"
        assert f"gateway: pid {stranger.pid} is another program now; left alone" in down.stderr, down.stderr
        assert f"rerank: pid {gone.pid} is gone" in down.stderr, down.stderr
        assert json.loads(down.stdout)["stopped"] == []
        again = ragmesh("down", "--state-dir", str(state))  # the stale record was cleared
        assert again.returncode == 0 and "nothing was running" in again.stderr, again.stderr
        assert (state / "RAGMESH_STATE").is_file()  # the folder itself is kept
    finally:
        stranger.kill()
        stranger.wait()


def test_down_stops_a_recorded_child_that_outlived_its_supervisor(tmp_path: Path) -> None:
    import psutil

    state = tmp_path / "state"
    orphan = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "ragmesh_gateway"],
                              start_new_session=True)
    try:
        _record(state, {"gateway": {"pid": orphan.pid, "started": psutil.Process(orphan.pid).create_time()}})
        down = ragmesh("down", "--state-dir", str(state))
        assert down.returncode == 0, down.stderr
        orphan.wait(timeout=20)
        assert f"stopped gateway (pid {orphan.pid})" in down.stderr, down.stderr
        assert json.loads(down.stdout)["stopped"] == [{"name": "gateway", "pid": orphan.pid}]
    finally:
        if orphan.poll() is None:
            orphan.kill()
            orphan.wait()


def test_a_stale_lock_file_is_reported_and_recovered(tmp_path: Path) -> None:
    """A lock left by a `ragmesh up` that died: its pid is not running, so the next command goes on."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    state = tmp_path / "state"
    _record(state, {})
    (state / "ragmesh.lock").write_text(f"{gone.pid}\n")
    ports = MeshPorts.free_block()
    with _held(ports.port("gateway")):  # so that `up` stops at the port check, after the lock
        up = ragmesh("up", "--state-dir", str(state), "--port-base", str(ports.base))
    assert f"stale lock of pid {gone.pid} (not running) cleared" in up.stderr, up.stderr
    assert up.returncode == UNAVAILABLE and "is in use" in up.stderr


def test_a_second_up_on_a_served_state_folder_is_refused(tmp_path: Path) -> None:
    from ragmesh_cli.mesh.lifecycle import StateFolder

    state = tmp_path / "state"
    folder = StateFolder(state)
    folder.claim()
    with folder.lock():
        up = ragmesh("up", "--state-dir", str(state), "--port-base", str(MeshPorts.free_block().base))
    assert up.returncode == UNAVAILABLE, up.stderr
    assert f"another `ragmesh up` (pid {os.getpid()}) serves {state}" in up.stderr, up.stderr
    assert f"ragmesh down --state-dir {state}" in up.stderr


def test_down_stops_a_running_up_through_its_supervisor(tmp_path: Path) -> None:
    """`ragmesh down` from another terminal: SIGTERM to the supervisor, which stops its children."""
    state = tmp_path / "state"
    driver = tmp_path / "driver.py"
    driver.write_text(
        "import sys, threading, signal\n"
        "from pathlib import Path\n"
        "from ragmesh_cli.mesh.lifecycle import StateFolder\n"
        "folder = StateFolder(Path(sys.argv[1]))\n"
        "folder.claim()\n"
        "stop = threading.Event()\n"
        "signal.signal(signal.SIGTERM, lambda *_: stop.set())\n"
        "with folder.lock():\n"
        "    folder.record_supervisor()\n"
        "    print('serving', flush=True)\n"
        "    stop.wait(120)\n"
        "    print('stopping', flush=True)\n"
    )
    up = subprocess.Popen([sys.executable, str(driver), str(state)], stdout=subprocess.PIPE, text=True)
    try:
        assert up.stdout.readline().strip() == "serving"
        down = ragmesh("down", "--state-dir", str(state))
        assert down.returncode == 0, down.stderr
        assert up.wait(timeout=20) == 0 and up.stdout.read().strip() == "stopping"
        assert f"stopped ragmesh up (pid {up.pid})" in down.stderr, down.stderr
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()

