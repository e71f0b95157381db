"""What `ragmesh up` started under a state folder, so that `ragmesh down` stops exactly that.

A state folder (``.ragmesh-state`` by default) holds, besides the services' data:

* ``RAGMESH_STATE``: the marker saying the folder is ragmesh's. `up` and `down` refuse a folder
  with other content and no marker, and delete nothing in it.
* ``ragmesh.lock``: locked (``flock``) by the `ragmesh up` serving from the folder, and holding
  its pid. The kernel drops the lock when that process dies, however it dies, so a lock left behind
  never blocks the next start; the pid left in it is only reported.
* ``run/processes.json``: every process `up` started, by pid *and start time*. A pid is signalled
  only while a process with that pid and that start time runs, so a record that outlived its
  processes (the pid since reused by another program) never makes `down` stop a stranger.

The embedded PostgreSQL and Redis keep their own pid files (ragmesh_cli.mesh.stores); `down` stops
them through stores, which checks the same way that a pid still is the server of this folder.

Ports: `up` checks every port it will listen on before it starts anything, and names the process
holding a busy one (:func:`busy_ports`, from /proc through psutil, where the user may see it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ragmesh_cli.mesh.stores import port_free

MARKER = "RAGMESH_STATE"
LOCK = "ragmesh.lock"
RECORD = Path("run") / "processes.json"
MARKER_TEXT = (
    "This folder is the state of an embedded ragmesh mesh (`ragmesh up`): logs, vector store, "
    "embedded PostgreSQL and Redis.\n`ragmesh down --state-dir <this folder>` stops what runs from it; "
    "delete the folder only after that.\n"
)
# Written by ragmesh before the marker existed; a folder holding one of these is adopted.
_EARLIER_STATE = (Path("postgres") / "port", Path("redis") / "port", Path("logs") / "gateway.log",
                  Path("qdrant"), Path("manifests"))
# The caches the model runtime and bench/scale.py keep in the default folder when run on their own
# (`make test` before `make run` left only those, and `up` refused the folder): folder -> its files.
_OWN_CACHES = {"runtime": "embed-cache*.npz", "bench-scale": "base-*.npz"}
# psutil's start times come from the kernel's clock ticks (10 ms) and read the same every time; a
# pid given to a new process has a later start time.
_SAME_START_S = 0.05


class StateError(Exception):
    """A state folder `up`/`down` must not use; the message says why and what to do."""


class NotRagmeshState(StateError):
    pass


class NoStateFolder(StateError):
    pass


class StateBusy(StateError):
    def __init__(self, state: Path, pid: int | None) -> None:
        who = f"pid {pid}" if pid else "pid unknown"
        super().__init__(f"another `ragmesh up` ({who}) serves {state}; stop it first with "
                         f"`ragmesh down --state-dir {state}`, or use another --state-dir")
        self.pid = pid


# ---------------------------------------------------------------- processes

def identity(pid: int) -> dict[str, Any] | None:
    """``{"pid", "started"}`` of a running process, or None when it is gone."""
    import psutil

    try:
        return {"pid": pid, "started": psutil.Process(pid).create_time()}
    except psutil.Error:
        return None


def recognise(entry: dict[str, Any]) -> str:
    """``ours`` (that very process still runs), ``gone``, or ``other`` (the pid is another program's now)."""
    import psutil

    try:
        process = psutil.Process(int(entry["pid"]))
        if process.status() == psutil.STATUS_ZOMBIE:
            return "gone"
        started = process.create_time()
    except (psutil.NoSuchProcess, KeyError, TypeError, ValueError):
        return "gone"
    except psutil.Error:
        return "other"
    return "ours" if abs(started - float(entry.get("started", -1))) < _SAME_START_S else "other"


def describe(pid: int) -> str:
    """``pid N (command line)`` as far as this user may see it."""
    import psutil

    try:
        command = " ".join(psutil.Process(pid).cmdline()) or psutil.Process(pid).name()
    except psutil.Error:
        return f"pid {pid}"
    return f"pid {pid} ({command[:120]})"


def stop_process(pid: int, *, started: float | None = None, timeout: float = 20.0) -> None:
    """SIGTERM, wait, SIGKILL: a process we started must not be left running. With ``started``,
    only the process that started then is signalled (psutil also refuses a pid reused meanwhile)."""
    import psutil

    try:
        process = psutil.Process(pid)
        if started is not None and abs(process.create_time() - started) >= _SAME_START_S:
            return
        process.send_signal(signal.SIGTERM)
    except psutil.Error:
        return
    if _ended(process, timeout):
        return
    with contextlib.suppress(psutil.Error):
        process.kill()
    _ended(process, 10.0)


def _ended(process, timeout: float) -> bool:
    """Waits for the process to end; a zombie (ended, not yet reaped by its parent) has ended."""
    import psutil

    deadline = time.monotonic() + timeout
    while True:
        try:
            if process.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        except psutil.Error:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


# ---------------------------------------------------------------- ports

def listeners(port: int) -> set[int | None] | None:
    """Pids listening on TCP ``port`` (None for a socket whose process this user cannot see), or
    None where the system does not say."""
    import psutil

    try:
        connections = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, NotImplementedError, OSError):
        return None
    return {c.pid for c in connections if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port}


def process_tree(pid: int) -> set[int]:
    """``pid`` and the pids of every process it started (none when it is gone)."""
    import psutil

    try:
        return {pid} | {child.pid for child in psutil.Process(pid).children(recursive=True)}
    except psutil.Error:
        return set()


def describe_holders(pids: set[int | None]) -> str:
    """Who holds a port, in words, from :func:`listeners`' pids: ``pid N (command)`` each."""
    return ", ".join(describe(p) if p is not None else "a process of another user"
                     for p in sorted(pids, key=lambda p: (p is None, p or 0)))


@dataclass(frozen=True)
class BusyPort:
    port: int
    name: str
    pids: frozenset[int]  # the holders this user can see

    @property
    def holder(self) -> str:
        """Who holds the port, in words: ``pid N (command)``, or why that is not known."""
        if self.pids:
            return ", ".join(describe(p) for p in sorted(self.pids))
        return "a process this user cannot see"


def busy_ports(planned: dict[int, str]) -> list[BusyPort]:
    busy = []
    for port, name in sorted(planned.items()):
        if not port_free(port):
            busy.append(BusyPort(port, name, frozenset(p for p in listeners(port) or () if p is not None)))
    return busy


# ---------------------------------------------------------------- the state folder

class StateFolder:
    def __init__(self, path: Path) -> None:
        self.path = Path(path).resolve()
        self.stale_lock: str | None = None  # set by lock(): what a lock left behind said

    # --- whose folder -------------------------------------------------------------------------
    def is_ragmesh(self) -> bool:
        return ((self.path / MARKER).is_file() or any((self.path / p).exists() for p in _EARLIER_STATE)
                or self._holds_only_own_caches())

    def _holds_only_own_caches(self) -> bool:
        """Every entry is a cache folder of ragmesh's holding only its own cache files."""
        entries = list(self.path.iterdir()) if self.path.is_dir() else []
        return bool(entries) and all(
            entry.is_dir() and entry.name in _OWN_CACHES
            and all(f.is_file() and f.match(_OWN_CACHES[entry.name]) for f in entry.iterdir())
            for entry in entries)

    def _refusal(self) -> NotRagmeshState:
        return NotRagmeshState(
            f"{self.path} is not a ragmesh state folder (no {MARKER} file in it, and it holds other "
            "files); nothing was started, stopped or deleted. Choose an empty or new folder with --state-dir")

    def claim(self) -> None:
        """For `up`: create the folder, or adopt an empty one or ragmesh's own; refuse any other."""
        if self.path.exists() and not self.path.is_dir():
            raise self._refusal()
        if self.path.is_dir() and any(self.path.iterdir()) and not self.is_ragmesh():
            raise self._refusal()
        self.path.mkdir(parents=True, exist_ok=True)
        marker = self.path / MARKER
        if not marker.is_file():
            marker.write_text(MARKER_TEXT, encoding="utf-8")

    def check(self) -> None:
        """For `down` and the admin commands: the folder exists and is ragmesh's."""
        if not self.path.is_dir():
            raise NoStateFolder(f"no state folder {self.path}: nothing to stop (is --state-dir right?)")
        if any(self.path.iterdir()) and not self.is_ragmesh():
            raise self._refusal()

    # --- the lock of the serving `up` ---------------------------------------------------------
    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold the folder for this process (`up`); StateBusy when another process holds it."""
        path = self.path / LOCK
        handle = open(path, "a+", encoding="utf-8")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StateBusy(self.path, _pid_in(path)) from None
            left = _pid_in(path)
            if left and left != os.getpid():
                why = "not running" if identity(left) is None else "now another program"
                self.stale_lock = f"stale lock of pid {left} ({why}) cleared"
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
            yield
        finally:
            with contextlib.suppress(OSError):
                handle.seek(0)
                handle.truncate()
            handle.close()  # closing drops the lock

    def holder(self) -> int | None:
        """Pid of the `ragmesh up` holding the folder now, else None."""
        path = self.path / LOCK
        if not path.is_file():
            return None
        with open(path, encoding="utf-8") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return _pid_in(path) or None
            fcntl.flock(handle, fcntl.LOCK_UN)
        return None

    # --- what was started ---------------------------------------------------------------------
    def read_record(self) -> dict[str, Any]:
        try:
            record = json.loads((self.path / RECORD).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {"supervisor": None, "children": {}}
        if not isinstance(record, dict):
            return {"supervisor": None, "children": {}}
        children = record.get("children")
        return {"supervisor": record.get("supervisor"), "children": children if isinstance(children, dict) else {}}

    def write_record(self, record: dict[str, Any]) -> None:
        path = self.path / RECORD
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_suffix(f".{os.getpid()}.tmp")
        scratch.write_text(json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
        scratch.replace(path)

    def record_supervisor(self) -> None:
        self.write_record({"supervisor": identity(os.getpid()), "children": {}})

    def record_child(self, name: str, pid: int) -> None:
        record = self.read_record()
        entry = identity(pid)
        if entry is not None:
            record["children"][name] = entry
            self.write_record(record)

    def clear_record(self) -> None:
        (self.path / RECORD).unlink(missing_ok=True)

    def recorded_pids(self) -> set[int]:
        """Pids of recorded processes that are still those very processes."""
        record = self.read_record()
        entries = [record["supervisor"], *record["children"].values()]
        return {int(e["pid"]) for e in entries if isinstance(e, dict) and recognise(e) == "ours"}


def _pid_in(path: Path) -> int:
    try:
        return int(path.read_text(encoding="utf-8").split()[0])
    except (OSError, ValueError, IndexError):
        return 0


# ---------------------------------------------------------------- ragmesh down

@dataclass
class DownReport:
    state_dir: str
    stopped: list[dict[str, Any]]
    notes: list[str]


def down(folder: StateFolder, *, log) -> DownReport:
    """Stop what `ragmesh up` started under ``folder``: the supervisor first (it stops its children
    in order), then any recorded child still running, then the embedded stores."""
    from ragmesh_cli.mesh import record as mesh_record, stores

    folder.check()
    report = DownReport(state_dir=str(folder.path), stopped=[], notes=[])
    record = folder.read_record()

    def stop(name: str, pid: int, timeout: float, started: float | None = None) -> None:
        stop_process(pid, started=started, timeout=timeout)
        report.stopped.append({"name": name, "pid": pid})
        log(f"stopped {name} (pid {pid})")

    supervisor = record["supervisor"] if isinstance(record["supervisor"], dict) else None
    serving = folder.holder()
    stopped_up = True
    if supervisor is not None and recognise(supervisor) == "ours":
        # Up to a minute and a half: it stops six children in turn, each with its own grace period.
        stop("ragmesh up", int(supervisor["pid"]), 90.0, float(supervisor["started"]))
    elif serving is not None and serving != os.getpid():
        stop("ragmesh up", serving, 90.0)  # a live lock holder is that very process
    else:
        stopped_up = False
        if supervisor is not None:
            report.notes.append(_stale_note("ragmesh up", supervisor))
    if stopped_up:
        record = folder.read_record()  # what its children left: empty when it stopped them all
    for name, entry in sorted(record["children"].items()):
        if not isinstance(entry, dict):
            continue
        seen = recognise(entry)
        if seen == "ours":
            stop(name, int(entry["pid"]), 20.0, float(entry["started"]))
        elif seen == "other" or not stopped_up:
            report.notes.append(_stale_note(name, entry, seen))
    for note in report.notes:
        log(note)
    postgres, redis = stores.running_postgres(folder.path), stores.running_redis(folder.path)
    stopped_stores = set(stores.stop_all(folder.path))
    for name, found in (("postgres", postgres), ("redis", redis)):
        if name in stopped_stores and found is not None:
            report.stopped.append({"name": name, "pid": found[0], "port": found[1]})
            log(f"stopped embedded {'PostgreSQL' if name == 'postgres' else 'Redis'} "
                f"(pid {found[0]}, port {found[1]})")
    if (folder.path / RECORD).exists():
        folder.clear_record()
        if report.notes:
            log("the stale record of started processes was cleared")
    mesh_record.remove(folder.path)  # where a mesh that no longer runs listened
    if not report.stopped:
        log(f"nothing was running under {folder.path}")
    return report


def _stale_note(name: str, entry: dict[str, Any], seen: str | None = None) -> str:
    pid = entry.get("pid")
    seen = seen or recognise(entry)
    if seen == "other":
        return f"{name}: pid {pid} is another program now; left alone"
    return f"{name}: pid {pid} is gone"

