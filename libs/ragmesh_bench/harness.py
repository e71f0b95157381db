"""A scratch database on a PostgreSQL server, and the running mesh a bench's smoke pass measures.

Both bench/ scripts and tests import this module (it is installed with the project: no ``sys.path``
edits). Everything here blocks; async callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[2]
# The corpus the e2e session mesh indexes (tests/e2e/conftest.py), and its id there.
SMOKE_CORPUS_FOLDER = ROOT / "tests" / "fixtures" / "e2e_corpus"
SMOKE_CORPUS = "quokka@1.0"
DEFAULT_POSTGRES = "postgresql://postgres@127.0.0.1:5432/postgres"


def bench_script(name: str):
    """``bench/<name>.py`` as a module, for the tests of a script's functions (bench/ is not a
    package, and nothing edits ``sys.path``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"bench_{name}", ROOT / "bench" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def say(message: str) -> None:
    """A bench script's progress line, on stderr so that stdout holds only its JSON lines."""
    print(f"eval: {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class NotServing(RuntimeError):
    """A server that exited, or did not answer, before :func:`wait_until_serving` gave up."""


class PortTaken(NotServing):
    """Another process answers on the port the server was started on.

    A port that was free when chosen can be bound by someone else (another test's server) before
    the server started on it binds it: that one then fails to bind, and the other answers in its
    place, with its own data.
    """


def wait_until_serving(url: str, *, process=None, timeout: float = 60.0, poll_s: float = 0.2) -> None:
    """Until ``url`` answers 2xx; NotServing when ``process`` (a Popen) exits first or time runs out.

    With ``process``, only an answer from that process (or one it started) counts: PortTaken when
    another process listens on the port.
    """
    import httpx

    _wait(lambda _: httpx.get(url, timeout=2).is_success, urlsplit(url).port, what=url, process=process,
          timeout=timeout, poll_s=poll_s)


def _wait(ready, port: int, *, what: str, process, timeout: float, poll_s: float = 0.2) -> None:
    """Until ``ready(port)`` is true (an exception counts as not yet) from ``process``."""
    import time

    def answers() -> bool:
        try:
            return bool(ready(port))
        except Exception:  # a health check that cannot connect yet, or times out
            return False

    deadline = time.monotonic() + timeout
    while True:
        if answers() and (process is None or listens_on(process, port)):
            return
        if process is not None and process.poll() is not None:
            raise NotServing(f"the server of {what} exited with {process.returncode} before it answered")
        if time.monotonic() > deadline:
            raise NotServing(f"{what} did not answer within {timeout:.0f}s")
        time.sleep(poll_s)


def listens_on(process, port: int) -> bool:
    """Whether ``process`` (a Popen) or a process it started listens on TCP ``port``; true also when
    the system does not say who listens. PortTaken when only other processes do."""
    from ragmesh_cli.mesh.lifecycle import describe_holders, listeners, process_tree

    found = listeners(port)
    if found is None:
        return True
    if found & process_tree(process.pid):
        return True
    if not found:
        return False  # it answered, then closed: ask again
    raise PortTaken(f"port {port} answers, but it is held by {describe_holders(found)}, "
                    f"not the server started (pid {process.pid})")


def serve_on_free_port(start, ready, *, timeout: float = 60.0, attempts: int = 3,
                       choose=None) -> tuple[int, object]:
    """``start(port)`` (a Popen) on a free port until it serves there itself: (port, process).

    ``ready`` is a path on the server (served once it answers 2xx) or a function of the port (true
    once it serves, a gRPC health check say). A port is only free when chosen (:class:`PortTaken`):
    when another process takes it first, the server is stopped and started again on another port,
    ``attempts`` times in all; any other failure to serve is raised at once. ``choose`` picks the
    port (default :func:`free_port`).
    """
    from ragmesh_cli.mesh.lifecycle import listeners, stop_process

    for attempt in range(1, attempts + 1):
        port = (choose or free_port)()
        process = start(port)
        try:
            if isinstance(ready, str):
                wait_until_serving(f"http://127.0.0.1:{port}{ready}", process=process, timeout=timeout)
            else:
                _wait(ready, port, what=f"127.0.0.1:{port}", process=process, timeout=timeout)
            return port, process
        except NotServing as exc:
            stop_process(process.pid, timeout=15.0)
            process.wait()
            # Lost the bind: it exited, and someone else listens there now.
            taken = isinstance(exc, PortTaken) or bool(listeners(port))
            if attempt == attempts or not taken:
                raise


def serve(start, ready, *, timeout: float = 60.0) -> tuple[int, object]:
    """:func:`serve_on_free_port` for a bench script: SystemExit with the reason instead."""
    try:
        return serve_on_free_port(start, ready, timeout=timeout)
    except NotServing as exc:
        raise SystemExit(str(exc)) from None


def psql(server_url: str, sql: str) -> None:
    """Run one SQL statement (CREATE/DROP DATABASE need no transaction around them)."""
    import asyncpg

    async def run() -> None:
        conn = await asyncpg.connect(server_url)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


def database_url(server_url: str, name: str) -> str:
    parts = urlsplit(server_url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


@contextmanager
def scratch_database(server_url: str, *, prefix: str = "ragmesh_bench") -> Iterator[str]:
    """A new database on the server, dropped afterwards (its connections ended first)."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    psql(server_url, f"CREATE DATABASE {name}")
    try:
        yield database_url(server_url, name)
    finally:
        drop_database(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    psql(server_url, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")
    psql(server_url, f"DROP DATABASE IF EXISTS {name}")


@contextmanager
def mesh_on_scratch_database(ports, *, prefix: str, extra_env: dict[str, str] | None = None):
    """A (not yet started) ``Mesh`` on ``ports`` with a fresh state folder and its own database on
    the PostgreSQL server of RAGMESH_POSTGRES_URL (default the test server); stopped, the database
    dropped and the folder removed afterwards."""
    import shutil
    import tempfile

    from ragmesh_cli.mesh import Mesh

    server = os.environ.get("RAGMESH_POSTGRES_URL") or DEFAULT_POSTGRES
    with scratch_database(server, prefix=prefix) as database:
        state = Path(tempfile.mkdtemp(prefix=f"{prefix}-"))
        mesh = Mesh(state_dir=state, ports=ports, extra_env={
            "RAGMESH_POSTGRES_URL": database,
            "RAGMESH_REDIS_URL": os.environ.get("RAGMESH_REDIS_URL", "redis://127.0.0.1:6379/14"),
            **(extra_env or {})})
        try:
            yield mesh
        finally:
            mesh.stop()
            shutil.rmtree(state, ignore_errors=True)


@dataclass(frozen=True)
class RunningMesh:
    """Where a started mesh serves, as its environment names it (``Mesh.env()`` plus RAGMESH_URL),
    and the corpus it serves."""

    gateway_url: str
    runtime_url: str
    indexer_addr: str
    retrieval_addr: str
    rerank_addr: str
    corpus: str
    corpus_folder: Path

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> RunningMesh:
        env = dict(os.environ if env is None else env)
        missing = [name for name in ("RAGMESH_URL", "RAGMESH_EMBED_URL", "RAGMESH_INDEXER_ADDR",
                                     "RAGMESH_RETRIEVAL_ADDR", "RAGMESH_RERANK_ADDR") if not env.get(name)]
        if missing:
            raise SystemExit(
                f"--smoke measures a running mesh: set {', '.join(missing)} (tests/e2e/test_bench_smoke.py "
                "passes its session mesh's environment; by hand: `ragmesh up --corpus tests/fixtures/e2e_corpus "
                "--library quokka` and the addresses it prints)")
        return cls(gateway_url=env["RAGMESH_URL"].rstrip("/"), runtime_url=env["RAGMESH_EMBED_URL"].rstrip("/"),
                   indexer_addr=env["RAGMESH_INDEXER_ADDR"], retrieval_addr=env["RAGMESH_RETRIEVAL_ADDR"],
                   rerank_addr=env["RAGMESH_RERANK_ADDR"],
                   corpus=env.get("RAGMESH_SMOKE_CORPUS") or SMOKE_CORPUS,
                   corpus_folder=Path(env.get("RAGMESH_SMOKE_CORPUS_FOLDER") or SMOKE_CORPUS_FOLDER))
