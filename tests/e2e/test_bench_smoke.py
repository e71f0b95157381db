"""Every bench script runs: its ``--smoke`` pass, against the session mesh (tests/README.md).

Scripts are found, not listed: a new bench/*.py with a ``__main__`` block and no ``--smoke`` pass
fails here. A smoke pass prints at least one JSON line on stdout and exits 0; it exits non-zero
when the API it measures changed.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragmesh_bench.harness import SMOKE_CORPUS

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
# Scripts whose smoke pass is known to be missing, with why; strict, so an entry must go once it runs.
PENDING: dict[str, str] = {}


def scripts() -> list[str]:
    return sorted(p.name for p in BENCH.glob("*.py") if 'if __name__ == "__main__"' in p.read_text(encoding="utf-8"))


def test_scripts_are_found() -> None:
    assert "mcp_bridge.py" in scripts() and len(scripts()) >= 10


@pytest.mark.parametrize("script", [
    pytest.param(name, marks=pytest.mark.xfail(reason=PENDING[name], strict=True)) if name in PENDING else name
    for name in scripts()])
def test_smoke_pass(script: str, mesh) -> None:
    env = {**mesh.env(), "RAGMESH_URL": mesh.gateway_url, "RAGMESH_SMOKE_CORPUS": SMOKE_CORPUS}
    started = time.monotonic()
    done = subprocess.run([sys.executable, str(BENCH / script), "--smoke"], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=240)
    print(f"{script} --smoke: {time.monotonic() - started:.1f}s", file=sys.stderr)
    assert done.returncode == 0, f"{script} --smoke exited {done.returncode}:\n{done.stderr[-3000:]}"
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines, f"{script} --smoke printed no JSON line:\n{done.stdout[-2000:]}"
    for line in lines:
        json.loads(line)
