"""The embedded mesh: the CPU model runtime and the five services, each its own OS process.

The CLI starts services as processes (``python -m ragmesh_<service>``) instead of importing them,
so the layering stays one-way. Every process listens on 127.0.0.1; ports come from a base port so
several meshes (a developer's `make run` and the test suite) can run side by side.

Qdrant's local mode can be opened by one process only: the retrieval process owns the storage and
serves the VectorStore gRPC service that the indexer writes through.

Every process appends its spans to ``<state>/traces/spans.jsonl`` (ragmesh_common.span_file), which
`ragmesh trace` reads.

Children never outlive the process that started them: on Linux each asks the kernel for SIGTERM
when its parent dies (``PR_SET_PDEATHSIG``), so a ``ragmesh up`` (or a test) killed with SIGKILL
leaves no orphaned services holding ports and storage locks. Each child is also recorded in the
state folder (ragmesh_cli.mesh.lifecycle), so ``ragmesh down`` finds one that is still shutting down.

A child is ready when its health check answers *and* the port is held by that child: a stale
process of an earlier mesh (or any other program) answering on the port is never taken for ours,
and :meth:`Mesh.wait_ready` names it instead.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ragmesh_cli.mesh import record
from ragmesh_common.settings import DEFAULT_PORTS, METRICS_PORTS
from ragmesh_common.span_file import default_span_file

# Where `ragmesh up` serves its own metrics (ragmesh_process_restarts_total), by default.
SUPERVISOR_METRICS_PORT = 9107


def _parent_death_signal() -> Callable[[], None] | None:
    """A preexec function asking for SIGTERM when the parent dies, or None where that is not
    available. libc is loaded here, before any fork: the child only makes the one call."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig = 1
    parent = os.getpid()

    def ask() -> None:
        prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: nobody would send the signal
            os.kill(os.getpid(), signal.SIGTERM)

    return ask

# Start order: the runtime loads models; retrieval owns the vector store the indexer writes to;
# the gateway comes last because its readiness depends on all the others.
SERVICES = ("runtime", "retrieval", "rerank", "generation", "indexer", "gateway")


@dataclass(frozen=True)
class MeshPorts:
    """Loopback ports of one mesh: the documented defaults, or consecutive ports from a base."""

    base: int | None = None

    def port(self, service: str) -> int:
        if self.base is None:
            return DEFAULT_PORTS[service]
        return self.base + SERVICES.index(service)

    def metrics_port(self, service: str) -> int:
        if self.base is None:
            return METRICS_PORTS[service]
        return self.base + 10 + SERVICES.index(service)

    def supervisor_metrics_port(self) -> int:
        return SUPERVISOR_METRICS_PORT if self.base is None else self.base + 10 + len(SERVICES)

    @classmethod
    def free_block(cls, size: int = 20) -> "MeshPorts":
        """Consecutive loopback ports, all free now, chosen BELOW the kernel's ephemeral range: the
        services take seconds to start, and a port in that range can meanwhile be handed to some
        outgoing connection (seen here as "address already in use" when the gateway binds)."""
        import random
        import socket

        low = 32768
        try:
            low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
        for _ in range(50):
            base = random.randrange(10000, max(10001, low - size))
            socks: list[socket.socket] = []
            try:
                for port in range(base, base + size):
                    sock = socket.socket()
                    socks.append(sock)
                    sock.bind(("127.0.0.1", port))
                return cls(base)
            except OSError:
                continue
            finally:
                for sock in socks:
                    sock.close()
        raise RuntimeError(f"no block of {size} free loopback ports below {low}")


@dataclass
class Mesh:
    state_dir: Path
    ports: MeshPorts = field(default_factory=MeshPorts)
    extra_env: dict[str, str] = field(default_factory=dict)
    runtime_url: str = ""        # empty: start the CPU runtime; else use this TEI/OpenAI server
    postgres: str = "external"   # "embedded" when `ragmesh up` started the PostgreSQL under the state folder
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def gateway_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.port('gateway')}"

    def endpoints(self) -> dict[str, str]:
        out = {"gateway": self.gateway_url, "mcp": f"{self.gateway_url}/mcp"}
        for svc in ("retrieval", "rerank", "generation", "indexer"):
            out[svc] = f"127.0.0.1:{self.ports.port(svc)} (gRPC)"
        out["runtime"] = self._runtime_base()
        return out

    def metrics_urls(self) -> dict[str, str]:
        """Each process's /metrics by service: the gRPC services' own metrics ports (those not turned
        off with port 0), then the gateway's and the runtime's, which serve it beside their API."""
        env = self.env()
        out = {svc: f"http://127.0.0.1:{env[f'RAGMESH_{svc.upper()}_METRICS_PORT']}/metrics"
               for svc in ("retrieval", "rerank", "generation", "indexer")
               if int(env.get(f"RAGMESH_{svc.upper()}_METRICS_PORT") or 0)}
        out["gateway"] = f"{self.gateway_url}/metrics"
        out["runtime"] = f"{self._runtime_base()}/metrics"
        return out

    def _runtime_base(self) -> str:
        return self.runtime_url or f"http://127.0.0.1:{self.ports.port('runtime')}"

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        runtime = self._runtime_base()
        env.update(
            {
                "RAGMESH_STATE_DIR": str(self.state_dir),
                "RAGMESH_EMBED_URL": env.get("RAGMESH_EMBED_URL") or runtime,
                "RAGMESH_RERANK_URL": env.get("RAGMESH_RERANK_URL") or runtime,
                "RAGMESH_LLM_URL": env.get("RAGMESH_LLM_URL") or f"{runtime}/v1",
                "RAGMESH_RUNTIME_PORT": str(self.ports.port("runtime")),
                "RAGMESH_GATEWAY_PORT": str(self.ports.port("gateway")),
                "PYTHONUNBUFFERED": "1",
                "OMP_WAIT_POLICY": env.get("OMP_WAIT_POLICY", "PASSIVE"),
            }
        )
        for svc in ("retrieval", "rerank", "generation", "indexer"):
            env[f"RAGMESH_{svc.upper()}_ADDR"] = f"127.0.0.1:{self.ports.port(svc)}"
            env[f"RAGMESH_{svc.upper()}_METRICS_PORT"] = str(self.ports.metrics_port(svc))
        # Spans go to the state folder unless the caller named another file (or "" for none), so
        # `ragmesh trace` can show any request without a collector; OTLP export is added by
        # RAGMESH_OTLP_ENDPOINT as in Compose.
        env.setdefault("RAGMESH_TRACE_FILE", str(default_span_file(self.state_dir)))
        env.update(self.extra_env)
        return env

    def start(self, *, timeout: float = 120.0, log=print) -> None:
        logs = self.state_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        env = self.env()
        try:
            for svc in SERVICES:
                if svc == "runtime" and self.runtime_url:
                    continue
                self.start_one(svc, env, logs)
                self.wait_ready(svc, timeout=timeout)
                log(f"{svc} ready")
        except BaseException:
            self.stop()
            raise
        record.write(self.state_dir, self.record())

    def record(self) -> record.MeshRecord:
        """Where this mesh listens, for the commands that talk to it (ragmesh_cli.mesh.record)."""
        from ragmesh_cli.mesh.lifecycle import identity

        env = self.env()
        return record.MeshRecord(
            gateway_url=self.gateway_url,
            grpc={svc: f"127.0.0.1:{self.ports.port(svc)}" for svc in ("retrieval", "rerank", "generation", "indexer")},
            runtime_url=self._runtime_base(),
            owner=identity(os.getpid()) or {"pid": os.getpid(), "started": 0},
            port_base=self.ports.base,
            auth_mode=env.get("RAGMESH_AUTH_MODE") or "disabled",
            postgres=self.postgres,
        )

    def command(self, svc: str) -> list[str]:
        return [sys.executable, "-m", f"ragmesh_{svc}", "--port", str(self.ports.port(svc))]

    def planned_ports(self) -> dict[int, str]:
        """Every loopback port this mesh's processes will listen on, with what listens there."""
        env = self.env()
        planned = {self.ports.port(svc): svc for svc in SERVICES if not (svc == "runtime" and self.runtime_url)}
        for svc in METRICS_PORTS:
            port = int(env.get(f"RAGMESH_{svc.upper()}_METRICS_PORT") or 0)
            if port:
                planned[port] = f"{svc} metrics"
        planned[self.ports.supervisor_metrics_port()] = "supervisor metrics"
        return planned

    def start_one(self, svc: str, env: dict[str, str] | None = None, logs: Path | None = None) -> None:
        env = env or self.env()
        logs = logs or self.state_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        out = open(logs / f"{svc}.log", "ab")
        # A new process group per child so Ctrl-C in the terminal reaches only `ragmesh up`, which
        # then stops the children in reverse order.
        self.processes[svc] = subprocess.Popen(
            self.command(svc), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=_parent_death_signal(),
        )
        out.close()
        from ragmesh_cli.mesh.lifecycle import StateFolder

        StateFolder(self.state_dir).record_child(svc, self.processes[svc].pid)

    def supervisor(self, *, log=print, policy=None):
        """A Supervisor restarting this mesh's children (ragmesh_cli.mesh.supervisor)."""
        from ragmesh_cli.mesh.supervisor import RestartPolicy, Supervisor

        env = self.env()
        return Supervisor(
            list(self.processes),
            poll=lambda svc: self.processes[svc].poll(),
            start=lambda svc: self.start_one(svc, env),
            healthy=self.is_healthy,
            log_tail=lambda svc: self._log_tail(svc, lines=20),
            policy=policy or RestartPolicy(),
            log=log,
        )

    def wait_ready(self, svc: str, *, timeout: float = 120.0) -> None:
        proc = self.processes.get(svc)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                tail = self._log_tail(svc)
                raise RuntimeError(f"{svc} exited with code {proc.returncode} during start\n{tail}")
            if self.answers(svc):
                stranger = self.stranger_on_port(svc)
                if stranger:
                    raise RuntimeError(stranger)
                if self._listens(svc):
                    return
            time.sleep(0.2)
        raise RuntimeError(f"{svc} not ready after {timeout:.0f}s\n{self._log_tail(svc)}")

    def is_healthy(self, svc: str) -> bool:
        """The health check answers, and from the process this mesh started."""
        return self.answers(svc) and self._listens(svc) and not self.stranger_on_port(svc)

    def answers(self, svc: str) -> bool:
        """The health check answers, whichever process holds the port (an observer that started
        nothing, such as the drills, asks this; `ragmesh up` also asks :meth:`is_healthy`)."""
        from ragmesh_common.healthcheck import check_grpc, check_http

        try:
            if svc == "runtime":
                return check_http(f"{self._runtime_base()}/health", timeout=1.0)
            if svc == "gateway":
                return check_http(f"{self.gateway_url}/health/live", timeout=1.0)
            return check_grpc(f"127.0.0.1:{self.ports.port(svc)}", timeout=1.0)
        except Exception:
            return False

    def _ours(self, svc: str) -> set[int]:
        """Pids of the child started for ``svc`` and of its descendants."""
        from ragmesh_cli.mesh.lifecycle import process_tree

        proc = self.processes.get(svc)
        return process_tree(proc.pid) if proc is not None else set()

    def _external(self, svc: str) -> bool:
        return svc == "runtime" and bool(self.runtime_url)  # a TEI/OpenAI server we did not start

    def _listens(self, svc: str) -> bool:
        """The child (or a process it started) listens on the service's port."""
        import psutil

        if self._external(svc):
            return True
        port = self.ports.port(svc)
        for pid in self._ours(svc):
            try:
                if any(c.status == psutil.CONN_LISTEN and c.laddr.port == port
                       for c in psutil.Process(pid).net_connections(kind="tcp")):
                    return True
            except psutil.Error:
                continue
        return False

    def stranger_on_port(self, svc: str) -> str:
        """Why the process listening on the service's port is not ours, or "" when none is another's."""
        from ragmesh_cli.mesh.lifecycle import describe_holders, listeners

        if self._external(svc):
            return ""
        port = self.ports.port(svc)
        found = listeners(port)
        if not found:
            return ""
        strangers = found - self._ours(svc)
        if not strangers:
            return ""
        proc = self.processes.get(svc)
        holder = describe_holders(strangers)
        started = f" (pid {proc.pid})" if proc is not None else ""
        return (f"{svc}: port {port} answers, but it is held by {holder}, not the {svc} this mesh "
                f"started{started}. Stop that process (`ragmesh down --state-dir ...` if an earlier mesh "
                f"left it), or choose other ports with --port-base")

    def stop_one(self, svc: str, *, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        proc = self.processes.pop(svc, None)
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def stop(self) -> None:
        self._forget_record()
        for svc in reversed(SERVICES):
            self.stop_one(svc)

    def _forget_record(self) -> None:
        """Delete the mesh record if this process wrote it (a mesh that never started has none)."""
        try:
            found = record.read(self.state_dir)
        except record.UnreadableRecord:
            return
        if found is not None and found.owner.get("pid") == os.getpid():
            record.remove(self.state_dir)

    def _log_tail(self, svc: str, lines: int = 30) -> str:
        path = self.state_dir / "logs" / f"{svc}.log"
        try:
            return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def generator_env(generator: str | None, llm_model: str = "", llm_sha256: str = "") -> dict[str, str]:
    """The runtime's generator profile as `ragmesh up --generator/--llm-model/--llm-sha256` chose it;
    what is not given is left to the environment (and the runtime's defaults)."""
    env: dict[str, str] = {}
    if generator:
        env["RAGMESH_RUNTIME_GENERATOR"] = generator
    if llm_model:
        env["RAGMESH_RUNTIME_LLM_MODEL"] = str(Path(llm_model).expanduser().resolve()) \
            if Path(llm_model).expanduser().exists() else llm_model
    if llm_sha256:
        env["RAGMESH_RUNTIME_LLM_SHA256"] = llm_sha256.lower()
    return env


def http_json(url: str, body: dict | None = None, *, timeout: float = 60.0, headers: dict | None = None):
    import json

    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method="POST" if data is not None else "GET")
    req.add_header("Content-Type", "application/json")
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 - loopback
        return json.loads(resp.read())
