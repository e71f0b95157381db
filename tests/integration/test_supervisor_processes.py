"""The supervisor with real OS processes: a killed child comes back with a new pid while the others
keep theirs, and no child outlives its supervisor, even one killed with SIGKILL (issue 12, Build 1).

The supervisor runs in a driver process of its own, like ``ragmesh up``; its children are sleepers
started through the real ``Mesh.start_one`` (only their command is replaced).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

DRIVER = textwrap.dedent('''
    import json, sys, time
    from pathlib import Path
    from ragmesh_cli.mesh import Mesh, MeshPorts

    class Sleepers(Mesh):
        def command(self, svc):
            return [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(600)"]

        def is_healthy(self, svc):
            return self.processes[svc].poll() is None

    state = Path(sys.argv[1])
    mesh = Sleepers(state_dir=state, ports=MeshPorts(20000))
    for svc in ("runtime", "rerank", "gateway"):
        mesh.start_one(svc)
    supervisor = mesh.supervisor(log=lambda line: print(line, flush=True))
    while True:
        (state / "pids.json").write_text(json.dumps({s: p.pid for s, p in mesh.processes.items()}))
        supervisor.check()
        time.sleep(0.1)
''')


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (dead, not yet reaped) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def wait_for(predicate, timeout_s: float = 10.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    return predicate()


def read_pids(state: Path) -> dict[str, int]:
    try:
        return json.loads((state / "pids.json").read_text())
    except (OSError, ValueError):
        return {}


@pytest.fixture
def driver(tmp_path: Path):
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    out = open(tmp_path / "driver.log", "wb")
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path)], stdout=out, stderr=subprocess.STDOUT)
    out.close()
    pids = wait_for(lambda: len(read_pids(tmp_path)) == 3 and read_pids(tmp_path))
    assert pids, (tmp_path / "driver.log").read_text()
    yield process, tmp_path, pids
    if process.poll() is None:
        process.kill()
        process.wait()
    for pid in read_pids(tmp_path).values():
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_killed_child_is_restarted_and_the_others_keep_serving(driver) -> None:
    process, state, pids = driver
    os.kill(pids["rerank"], signal.SIGKILL)
    now = wait_for(lambda: (p := read_pids(state)).get("rerank") not in (None, pids["rerank"]) and p)
    assert now, (state / "driver.log").read_text()
    assert alive(now["rerank"])
    assert {s: now[s] for s in ("runtime", "gateway")} == {s: pids[s] for s in ("runtime", "gateway")}
    log = (state / "driver.log").read_text()
    assert "rerank killed by SIGKILL; restarting it in" in log
    assert "--- last lines of rerank's log ---" in log and "started" in log
    assert process.poll() is None, "the supervisor keeps running"


def test_no_child_outlives_a_supervisor_killed_with_sigkill(driver) -> None:
    process, _, pids = driver
    process.kill()
    process.wait()
    left = wait_for(lambda: not [pid for pid in pids.values() if alive(pid)], timeout_s=10)
    assert left, f"children still running after their supervisor died: {[p for p in pids.values() if alive(p)]}"
