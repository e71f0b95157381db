"""Indexer integration fixtures: the real CPU runtime, a local Qdrant store and a PostgreSQL registry."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def runtime_url(tmp_path_factory) -> str:
    """The CPU model runtime as its own process, like in the embedded mesh."""
    port = _free_port()
    log = tmp_path_factory.mktemp("runtime") / "runtime.log"
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE")
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "ragmesh_runtime", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"runtime exited: {log.read_text()[-2000:]}")
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("runtime not healthy in 120 s")
    yield url
    proc.terminate()
    proc.wait(timeout=20)


@pytest.fixture
def corpus_copy(tmp_path: Path) -> Path:
    dest = tmp_path / "corpus"
    shutil.copytree(ROOT / "tests" / "fixtures" / "e2e_corpus", dest)
    return dest
