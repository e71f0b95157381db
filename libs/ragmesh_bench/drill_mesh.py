"""The pieces of the fault drills (bench/drills.py): a supervised mesh, faults, and load.

``DrillMesh`` runs ``ragmesh up`` as a user does (its supervisor restarts what dies) on a block of
free loopback ports, with its own state folder, hence its OWN PostgreSQL and Redis started from the
pip packages (never the shared servers): the drills kill those too. It is the embedded default
(authentication disabled, sessions in Redis) plus rate limits in Redis, so that a Redis outage has
them to fail open. ``token_gateway`` adds a second gateway process on the same services with token
auth, as Compose runs it, for the privilege cases.

``Load`` is a few clients sending searches, chats and session follow-ups without pause, each
answer recorded with its status, error code and degraded flags.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from ragmesh_bench.harness import wait_until_serving

ROOT = Path(__file__).resolve().parents[2]
API = "/api/rag/v1"
QUESTIONS = [
    "How does the scheduler assign jobs?", "What is the default queue size?", "How do I configure retries?",
    "What does the worker do when a job fails?", "How are jobs prioritised?", "What is quokka?",
]
WORDS = ["worker", "queue", "retry", "timeout", "priority", "backoff", "limit", "config", "default", "job",
         "cluster", "node", "log", "metric", "shutdown", "restart", "batch", "window", "cache", "lease"]


@dataclass(frozen=True)
class Sample:
    """One answer the load got: when it was asked and answered, and what it said."""

    started: float
    ended: float
    op: str
    status: int  # 0: no HTTP answer at all (connection refused, timeout)
    code: str = ""
    degraded: tuple[str, ...] = ()
    request_id: str = ""  # the gateway's x-request-id: its spans in the mesh's span file

    @property
    def answered(self) -> bool:
        return 200 <= self.status < 300


class DrillMesh:
    def __init__(self, state: Path, corpus: Path, *, env: dict[str, str] | None = None) -> None:
        from ragmesh_cli.mesh import Mesh, MeshPorts

        self.state = state
        self.corpus = corpus
        self.ports = MeshPorts.free_block()
        self.probe = Mesh(state_dir=state, ports=self.ports)  # for its health checks only
        self.gateway = self.probe.gateway_url
        self.log_path = state / "ragmesh-up.log"
        self.extra_env = dict(env or {})
        self.process: subprocess.Popen | None = None

    # --- the mesh ----------------------------------------------------------------------------------
    def start(self, timeout_s: float = 600) -> None:
        env = {k: v for k, v in os.environ.items()
               if k not in ("RAGMESH_POSTGRES_URL", "RAGMESH_REDIS_URL", "RAGMESH_STATE_DIR")}
        env.update({
            "RAGMESH_RATE_LIMITS": "*=1000/2000", "RAGMESH_LOG_LEVEL": "warning",
            "RAGMESH_RUNTIME_CACHE_SAVE_INTERVAL_S": "5", "OMP_WAIT_POLICY": "PASSIVE", **self.extra_env,
        })
        # Claimed as `ragmesh up` claims it (the RAGMESH_STATE marker), so that the drill's own log in
        # it does not make the folder a stranger's.
        from ragmesh_cli.mesh.lifecycle import StateFolder

        StateFolder(self.state).claim()
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "ragmesh_cli.main", "up", "--corpus", str(self.corpus),
                 "--state-dir", str(self.state), "--port-base", str(self.ports.base)],
                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"ragmesh up exited with {self.process.returncode}:\n{self.log()[-4000:]}")
            if "serving; Ctrl-C to stop" in self.log():
                return
            time.sleep(0.5)
        raise RuntimeError(f"ragmesh up not serving after {timeout_s:.0f}s:\n{self.log()[-4000:]}")

    def log(self) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        from ragmesh_cli.mesh import stores

        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        stores.stop_all(self.state)  # its own PostgreSQL and Redis

    def children(self) -> dict[str, int]:
        """service -> pid of the ``python -m ragmesh_<service>`` child of ``ragmesh up``."""
        import psutil

        out = {}
        for child in psutil.Process(self.process.pid).children():
            try:
                cmdline = child.cmdline()
            except psutil.Error:
                continue
            for part in cmdline:
                if part.startswith("ragmesh_") and child.status() != psutil.STATUS_ZOMBIE:
                    out[part.removeprefix("ragmesh_")] = child.pid
        return out

    def healthy(self, service: str) -> bool:
        # The probe started nothing, so it asks whether the service answers; which process answers
        # is the drill's question (children() names the one `ragmesh up` runs now).
        return self.probe.answers(service)

    # --- the stores ------------------------------------------------------------------------------
    @property
    def postgres_url(self) -> str:
        from ragmesh_cli.mesh import stores

        return stores.postgres_url_for(int((self.state / "postgres" / "port").read_text()))

    def store_pid(self, store: str) -> int:
        path = self.state / ("postgres/data/postmaster.pid" if store == "postgres" else "redis/redis.pid")
        return int(path.read_text().split()[0])

    def restart_store(self, store: str) -> None:
        from ragmesh_cli.mesh import stores

        (stores.ensure_postgres if store == "postgres" else stores.ensure_redis)(self.state)

    def store_up(self, store: str) -> bool:
        from ragmesh_cli.mesh import stores

        return stores._alive(self.store_pid(store), "postgres" if store == "postgres" else "redis-server")

    @property
    def redis_url(self) -> str:
        from ragmesh_cli.mesh import stores

        return stores.redis_url_for(int((self.state / "redis" / "port").read_text()))

    @contextlib.contextmanager
    def token_gateway(self) -> Iterator[str]:
        """A second gateway on this mesh's services with token auth (anonymous allowed); its URL."""
        port = self.ports.base + 19
        env = {**self.probe.env(), "RAGMESH_AUTH_MODE": "tokens", "RAGMESH_ALLOW_ANONYMOUS": "true",
               "RAGMESH_POSTGRES_URL": self.postgres_url, "RAGMESH_REDIS_URL": self.redis_url,
               "RAGMESH_GATEWAY_PORT": str(port), "RAGMESH_LOG_LEVEL": "warning"}
        with open(self.state / "token-gateway.log", "ab") as log:
            process = subprocess.Popen([sys.executable, "-m", "ragmesh_gateway"], env=env, stdout=log,
                                       stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_until_serving(url + "/health/live", process=process, timeout=120)
            yield url
        finally:
            process.terminate()
            process.wait(timeout=30)

    def create_token(self, client: str, scopes: list[str]) -> str:
        """A token made by the gateway's admin entry point, as `ragmesh token create` makes one (a
        library imports no service), in the database and schema the token gateway reads."""
        env = {**self.probe.env(), "RAGMESH_POSTGRES_URL": self.postgres_url}
        done = subprocess.run([sys.executable, "-m", "ragmesh_gateway.admin", "token", "create", "--client", client,
                               *(f"--scope={scope}" for scope in scopes)],
                              env=env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"token create failed ({done.returncode}): {done.stderr.strip()[-500:]}")
        return json.loads(done.stdout)["token"]


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


# --- load ------------------------------------------------------------------------------------------

@dataclass
class Load:
    """``clients`` loops asking without pause until stopped; every answer is a Sample."""

    gateway: str
    clients: int = 4
    samples: list[Sample] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)
    timeout_s: float = 20.0

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="drill-load", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60)

    def since(self, t0: float, t1: float | None = None) -> list[Sample]:
        with self._lock:
            return [s for s in self.samples if s.started >= t0 and (t1 is None or s.started <= t1)]

    async def _run(self) -> None:
        async with httpx.AsyncClient(base_url=self.gateway, timeout=self.timeout_s) as http:
            await asyncio.gather(*(self._client(http, n) for n in range(self.clients)))

    async def _client(self, http: httpx.AsyncClient, n: int) -> None:
        rng = random.Random(n)
        session: str | None = None
        while not self._stop.is_set():
            roll = rng.random()
            # Half the searches are new words (a query vector retrieval has not cached: the
            # embedding runtime is needed), half repeat (served from retrieval's query cache).
            query = rng.choice(QUESTIONS) + (f" {rng.choice(WORDS)} {rng.choice(WORDS)}" if rng.random() < 0.5 else "")
            if roll < 0.45:
                op, path, body = "search", f"{API}/search", {"query": query, "top_k": 5}
            elif roll < 0.8 or session is None:
                op, path, body = "chat", f"{API}/chat", {"question": rng.choice(QUESTIONS)}
            else:
                op, path, body = "follow-up", f"{API}/chat", {"question": "and what is its default?",
                                                               "session_id": session}
            sample, data = await ask(http, op, path, body)
            if op != "search" and sample.answered and data.get("session_id"):
                session = data["session_id"]
            if sample.status == 404 and sample.code == "NOT_FOUND":
                session = None  # an expired or lost session: start a new one
            with self._lock:
                self.samples.append(sample)
            if not sample.answered:
                await asyncio.sleep(0.05)  # a refused request comes back at once: do not spin


async def ask(http: httpx.AsyncClient, op: str, path: str, body: dict | None = None,
              method: str = "POST") -> tuple[Sample, dict]:
    started = time.monotonic()
    try:
        response = await http.request(method, path, json=body)
    except httpx.HTTPError as exc:
        return Sample(started, time.monotonic(), op, 0, type(exc).__name__), {}
    ended = time.monotonic()
    try:
        data = response.json()
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}
    degraded = list(data.get("degraded") or [])
    degraded += [flag.strip() for flag in response.headers.get("ragmesh-degraded", "").split(",") if flag.strip()]
    code = str(data.get("code") or (data.get("error") or {}).get("code") or "") if response.status_code >= 300 \
        or data.get("status") == "error" else ""
    return Sample(started, ended, op, response.status_code, code, tuple(sorted(set(degraded))),
                  response.headers.get("x-request-id", "")), data


def sync_ask(gateway: str, method: str, path: str, body: dict | None = None, headers: dict | None = None,
             content: bytes | None = None) -> httpx.Response:
    if content is not None:
        return httpx.request(method, gateway + path, content=content, headers=headers or {}, timeout=30)
    return httpx.request(method, gateway + path, json=body, headers=headers or {}, timeout=30)


def as_json(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2, default=str)
