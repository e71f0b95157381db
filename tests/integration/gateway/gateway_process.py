"""The gateway as a real OS process (``python -m ragmesh_gateway``), its logs captured to a file."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ragmesh_bench.harness import NotServing, free_port, serve_on_free_port
from ragmesh_cli.mesh.lifecycle import stop_process

__all__ = ["GatewayProcess", "free_port", "gateway_env", "running_gateway"]


@dataclass
class GatewayProcess:
    url: str
    log_path: Path
    process: subprocess.Popen

    def logs(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")


def gateway_env(**variables: str) -> dict[str, str]:
    """The test's environment minus any RAGMESH_* a developer has set, plus ``variables``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMESH_")}
    env.update({"PYTHONUNBUFFERED": "1", "OMP_WAIT_POLICY": "PASSIVE"})
    env.update(variables)
    return env


@contextlib.contextmanager
def running_gateway(log_dir: Path, env: dict[str, str], *, name: str = "gateway",
                    timeout_s: float = 30.0) -> Iterator[GatewayProcess]:
    """``python -m ragmesh_gateway`` on a free port, live and answering from that very process
    (ragmesh_bench.harness.serve_on_free_port: a port taken by another server first is given up
    for another); stopped afterwards."""
    started: list[GatewayProcess] = []

    def start(port: int) -> subprocess.Popen:
        log_path = log_dir / f"{name}-{port}.log"
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "ragmesh_gateway", "--host", "127.0.0.1", "--port", str(port)],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        started.append(GatewayProcess(f"http://127.0.0.1:{port}", log_path, process))
        return process

    try:
        # free_port looked up at each call: a test hands out a taken port through it.
        serve_on_free_port(start, "/health/live", timeout=timeout_s, choose=lambda: free_port())
    except NotServing as exc:
        raise RuntimeError(f"{exc}:\n{started[-1].logs()[-3000:]}") from None
    gateway = started[-1]
    try:
        yield gateway
    finally:
        stop_process(gateway.process.pid, timeout=15.0)
        gateway.process.wait()
