"""A runtime that is killed restarts warm (issue 12, defect 2): its caches were memory-only by
default, so after a restart chats took 13-44 s and searches 3-8 s until they were warm again.

Now they live in the state folder by default and are saved while they change, so even SIGKILL
(no shutdown hook) loses at most one save interval."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np
import pytest

from ragmesh_bench.harness import NotServing, serve_on_free_port

TEXTS = ["The supervisor restarts a child that exits.", "Caches live in the state folder."]


def start(state: Path, log: Path) -> tuple[subprocess.Popen, str]:
    def launch(port: int) -> subprocess.Popen:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMESH_")}
        env.update(RAGMESH_STATE_DIR=str(state), RAGMESH_RUNTIME_PORT=str(port), OMP_WAIT_POLICY="PASSIVE",
                   RAGMESH_RUNTIME_CACHE_SAVE_INTERVAL_S="0.5")
        with open(log, "ab") as out:
            return subprocess.Popen([sys.executable, "-m", "ragmesh_runtime"], env=env, stdout=out,
                                    stderr=subprocess.STDOUT)

    try:
        port, process = serve_on_free_port(launch, "/health", timeout=120)
    except NotServing as exc:
        pytest.fail(f"{exc}:\n{log.read_text(errors='replace')[-3000:]}")
    return process, f"http://127.0.0.1:{port}"


def test_a_killed_runtime_restarts_with_its_caches(tmp_path: Path) -> None:
    state, log = tmp_path / "state", tmp_path / "runtime.log"
    cache_file = state / "runtime" / "embed-cache.npz"
    process, url = start(state, log)
    try:
        first = httpx.post(url + "/embed", json={"inputs": TEXTS}, timeout=60).json()
        deadline = time.monotonic() + 20
        while not cache_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert cache_file.exists(), "the caches are saved in the state folder by default, while serving"
        time.sleep(1.0)  # a save may be under way; let it finish before the crash
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    process, url = start(state, log)
    try:
        loaded = [line for line in log.read_text().splitlines() if "caches loaded" in line][-1]
        assert "'embed-cache.npz': 0" not in loaded, loaded
        again = httpx.post(url + "/embed", json={"inputs": TEXTS}, timeout=60).json()
        assert np.allclose(np.array(again), np.array(first), atol=1e-6)
    finally:
        process.terminate()
        process.wait(timeout=30)
