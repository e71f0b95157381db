"""The processes a retrieval eval needs (``ragmesh_cli.mesh.Mesh``), its database, and indexing.

Part of bench/eval_retrieval.py; see there.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from ragmesh_bench.harness import database_url, say  # noqa: F401 - the eval scripts import them from here
from ragmesh_cli.mesh import Mesh, MeshPorts

DEFAULT_PG = "postgresql://postgres@127.0.0.1:5432/postgres"
SERVICES = ("runtime", "retrieval", "rerank", "indexer")


class EvalMesh:
    """The four processes a retrieval eval needs, with retrieval restartable per mode."""

    def __init__(self, state_dir: Path, database_url: str) -> None:
        self.mesh = Mesh(state_dir=state_dir, ports=MeshPorts.free_block(), extra_env={
            "RAGMESH_POSTGRES_URL": database_url,
            "RAGMESH_REDIS_URL": os.environ.get("RAGMESH_REDIS_URL", "redis://127.0.0.1:6379/15"),
            "RAGMESH_LOG_LEVEL": os.environ.get("RAGMESH_LOG_LEVEL", "WARNING"),
            "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE"),
        })
        # The runtime keeps its vector cache across restarts here, so a later run over the same
        # index (tuning, then test) finds the chunks the indexer embedded.
        self.mesh.extra_env.setdefault("RAGMESH_RUNTIME_EMBED_CACHE_FILE", str(state_dir / "runtime-vectors.npz"))
        self.mode = ""

    def start(self, mode: str) -> None:
        env = self.env(mode)
        for svc in SERVICES:
            self.mesh.start_one(svc, env)
            self.mesh.wait_ready(svc, timeout=240)
            say(f"{svc} ready")
        self.mode = mode

    def env(self, mode: str) -> dict[str, str]:
        env = self.mesh.env()
        env["RAGMESH_RETRIEVAL_MODE"] = mode
        return env

    def set_mode(self, mode: str) -> None:
        if mode == self.mode:
            return
        self.mesh.stop_one("retrieval")
        self.mesh.start_one("retrieval", self.env(mode))
        self.mesh.wait_ready("retrieval", timeout=240)
        self.mode = mode
        say(f"retrieval restarted in {mode} mode")

    def restart_dead(self) -> list[str]:
        dead = [svc for svc in SERVICES if self.mesh.processes[svc].poll() is not None]
        for svc in dead:
            self.mesh.processes.pop(svc)
            self.mesh.start_one(svc, self.env(self.mode))
            self.mesh.wait_ready(svc, timeout=240)
        return dead

    def addr(self, svc: str) -> str:
        return f"127.0.0.1:{self.mesh.ports.port(svc)}"

    def stop(self) -> None:
        for svc in reversed(SERVICES):
            self.mesh.stop_one(svc)


def index_corpus(mesh: EvalMesh, folder: Path, library: str, attempts: int = 3) -> dict:
    """``index ci``; if a process of the mesh died meanwhile (on a shared machine something may
    kill it), restart the dead ones and run ci again: the indexer resumes, reusing what it wrote."""
    for attempt in range(1, attempts + 1):
        try:
            return _index_once(mesh, folder, library)
        except RuntimeError as failed:
            dead = mesh.restart_dead()
            if attempt == attempts or not dead:
                raise SystemExit(str(failed)) from None
            say(f"index ci failed with {', '.join(dead)} gone; restarted them, attempt {attempt + 1}")
    raise AssertionError("unreachable")


def _index_once(mesh: EvalMesh, folder: Path, library: str) -> dict:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "ragmesh_cli.main", "index", "ci", "--corpus", str(folder),
         "--library", library, "--version", "eval", "--timeout", str(4 * 3600)],
        env=mesh.env(mesh.mode), stdout=subprocess.PIPE, text=True, timeout=4 * 3600,  # progress: our stderr
    )
    if done.returncode != 0:
        raise RuntimeError(f"index ci failed ({done.returncode}):\n{done.stdout[-2000:]}")
    say(f"indexed in {time.perf_counter() - started:.0f}s")
    for candidate in (done.stdout, (done.stdout.strip().splitlines() or [""])[-1]):
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return {}
