"""Fault injection: the process really ends (exit 137, no cleanup) at the named checkpoint, and
only at its n-th arrival; an armed file fires once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ragmesh_indexer.checkpoints import CHECKPOINTS, FaultInjector
from ragmesh_indexer.domain import scan_corpus

SCRIPT = textwrap.dedent("""
    import asyncio, sys
    from ragmesh_indexer.checkpoints import checkpoint_from_env

    async def main():
        checkpoint = checkpoint_from_env()
        for name in ["scanned", "embed-batch", "embed-batch", "embed-batch", "built"]:
            print("reached", name, flush=True)
            await checkpoint(name)
        print("finished", flush=True)

    try:
        asyncio.run(main())
    finally:
        print("cleanup ran", flush=True)
""")


def run(env: dict[str, str]) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAGMESH_INDEXER_FAULT")}
    return subprocess.run([sys.executable, "-c", SCRIPT], env={**clean, **env}, capture_output=True, text=True,
                          timeout=60)


def test_fault_at_ends_the_process_at_the_nth_arrival_without_cleanup() -> None:
    done = run({"RAGMESH_INDEXER_FAULT_AT": "embed-batch#2"})
    assert done.returncode == 137
    assert done.stdout.split("\n")[:-1] == ["reached scanned", "reached embed-batch", "reached embed-batch"]


def test_without_a_fault_everything_runs() -> None:
    done = run({})
    assert done.returncode == 0 and "finished" in done.stdout and "cleanup ran" in done.stdout


def test_armed_file_fires_once_and_is_consumed(tmp_path: Path) -> None:
    armed = tmp_path / "fault"
    armed.write_text("built")
    first = run({"RAGMESH_INDEXER_FAULT_FILE": str(armed)})
    assert first.returncode == 137 and "reached built" in first.stdout and not armed.exists()
    assert run({"RAGMESH_INDEXER_FAULT_FILE": str(armed)}).returncode == 0


def test_unknown_checkpoint_is_refused() -> None:
    with pytest.raises(ValueError):
        FaultInjector.parse("no-such-point")
    assert FaultInjector.parse("") is None
    assert FaultInjector.parse("promote-committed#3").nth == 3
    assert {"parsed-file", "embed-batch", "upserted-batch", "promote-committed"} <= set(CHECKPOINTS)


def test_scan_reports_each_file(tmp_path: Path) -> None:
    for name in ("a.md", "b.txt", "c.png"):
        (tmp_path / name).write_text("# Title\n\nbody\n")
    seen: list[tuple[int, int]] = []
    scan_corpus(tmp_path, on_file=lambda done, total: seen.append((done, total)))
    assert seen == [(1, 3), (2, 3), (3, 3)]
