"""The gateway as a real OS process (``python -m ragmesh_gateway``), its logs captured to a file."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx



@dataclass
class GatewayProcess:
    url: str
    log_path: Path
    process: subprocess.Popen

    def logs(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def gateway_env(**variables: str) -> dict[str, str]:
    """The test's environment minus any RAGMESH_* a developer has set, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMESH_")}
    env.update({"PYTHONUNBUFFERED": "1", "OMP_WAIT_POLICY": "PASSIVE"})
    env.update(variables)
    return env


@contextlib.contextmanager
def running_gateway(log_dir: Path, env: dict[str, str], *, name: str = "gateway",
                    timeout_s: float = 30.0) -> Iterator[GatewayProcess]:
    port = free_port()
    log_path = log_dir / f"{name}-{port}.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "ragmesh_gateway", "--host", "127.0.0.1", "--port", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    gateway = GatewayProcess(f"http://127.0.0.1:{port}", log_path, process)
    try:
        wait_live(gateway, timeout_s)
        yield gateway
    finally:
        stop(process)


def wait_live(gateway: GatewayProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if gateway.process.poll() is not None:
            raise RuntimeError(f"gateway exited with {gateway.process.returncode}:\n{gateway.logs()[-3000:]}")
        try:
            if httpx.get(f"{gateway.url}/health/live", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"gateway not live after {timeout_s}s:\n{gateway.logs()[-3000:]}")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
