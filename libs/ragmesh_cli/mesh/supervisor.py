"""Keeps the embedded mesh serving: a child that dies is restarted, the others keep serving.

``ragmesh up`` used to stop all six processes when one of them exited ("rerank exited; stopping"),
turning one crash into a total outage. The supervisor instead, for each child that exits:

1. reports it on stderr with the exit status and the child's last log lines, and counts it in
   ``ragmesh_process_restarts_total{service}`` (served on the supervisor's metrics port);
2. restarts it after an exponential backoff (``initial_backoff_s`` doubling per crash within
   ``window_s``, at most ``max_backoff_s``), while every other child keeps serving — the mesh
   degrades as designed (rerank down: answers with ``degraded: ["rerank"]``);
3. gives up, and stops the whole mesh, only when a child has crashed more than ``max_restarts``
   times within ``window_s``: a child that cannot stay up is a configuration problem, and
   restarting it forever hides it.

Children never outlive the supervisor: each asks the kernel for SIGTERM when its parent dies
(Linux ``PR_SET_PDEATHSIG``, see mesh.py), so even a SIGKILLed ``ragmesh up`` leaves nothing behind.

The supervisor runs on the thread that started the children and is driven by :meth:`check`,
called every half second from ``ragmesh up``'s main loop; it never blocks on a child.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import Counter, Gauge

RESTARTS = Counter("ragmesh_process_restarts", "Children of `ragmesh up` restarted after they exited",
                   ["service"])
UP = Gauge("ragmesh_process_up", "1 while the child process runs and answers its health check", ["service"])


@dataclass(frozen=True)
class RestartPolicy:
    initial_backoff_s: float = 0.25
    max_backoff_s: float = 30.0
    max_restarts: int = 5
    window_s: float = 120.0

    def backoff(self, crashes: int) -> float:
        """Seconds to wait before restarting a child that crashed ``crashes`` times in the window."""
        return min(self.max_backoff_s, self.initial_backoff_s * 2 ** max(0, crashes - 1))


@dataclass
class _Child:
    crashes: list[float] = field(default_factory=list)  # monotonic times of exits within the window
    restart_at: float | None = None  # a restart is due then
    started_at: float = 0.0
    healthy: bool = False


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with code {returncode}"


class Supervisor:
    """Watches named children through four callables, so tests can supervise anything:

    ``poll(name)``: the exit status, or None while it runs; ``start(name)``: start it (again);
    ``healthy(name)``: it answers its health check; ``log_tail(name)``: its last log lines.
    """

    def __init__(
        self,
        names: list[str],
        *,
        poll: Callable[[str], int | None],
        start: Callable[[str], None],
        healthy: Callable[[str], bool],
        log_tail: Callable[[str], str],
        policy: RestartPolicy = RestartPolicy(),
        log: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.names = list(names)
        self._poll, self._start, self._healthy, self._log_tail = poll, start, healthy, log_tail
        self.policy = policy
        self._log = log
        self._clock = clock
        self._children = {name: _Child(started_at=clock(), healthy=True) for name in self.names}
        for name in self.names:
            UP.labels(name).set(1)

    def check(self) -> str | None:
        """One round: notice exits, start due restarts, note recoveries. Returns why the mesh must
        stop (a child crashing too often), else None."""
        now = self._clock()
        for name, child in self._children.items():
            if child.restart_at is not None:
                if now >= child.restart_at:
                    child.restart_at = None
                    child.started_at = now
                    child.healthy = False
                    self._start(name)
                continue
            returncode = self._poll(name)
            if returncode is not None:
                reason = self._crashed(name, child, returncode, now)
                if reason:
                    return reason
            elif not child.healthy and self._healthy(name):
                child.healthy = True
                UP.labels(name).set(1)
                self._log(f"{name} is back: serving {now - child.started_at:.1f}s after its restart")
        return None

    def _crashed(self, name: str, child: _Child, returncode: int, now: float) -> str | None:
        UP.labels(name).set(0)
        child.crashes = [t for t in child.crashes if now - t < self.policy.window_s] + [now]
        crashes = len(child.crashes)
        tail = self._log_tail(name).rstrip()
        report = f"{name} {describe_exit(returncode)}"
        if crashes > self.policy.max_restarts:
            self._log(f"{report}; it crashed {crashes} times within {self.policy.window_s:.0f}s, giving up"
                      + (f"\n--- last lines of {name}'s log ---\n{tail}" if tail else ""))
            return f"{name} keeps crashing ({crashes} times within {self.policy.window_s:.0f}s)"
        delay = self.policy.backoff(crashes)
        RESTARTS.labels(name).inc()
        self._log(f"{report}; restarting it in {delay:.2f}s (crash {crashes} of at most "
                  f"{self.policy.max_restarts} within {self.policy.window_s:.0f}s); the others keep serving"
                  + (f"\n--- last lines of {name}'s log ---\n{tail}" if tail else ""))
        child.restart_at = now + delay
        return None

    def restarts_pending(self) -> list[str]:
        return [name for name, child in self._children.items() if child.restart_at is not None]
