"""The supervisor's decisions with a fake clock and fake children (issue 12, defect 1: one death
used to stop all six processes). Real processes: tests/integration/test_supervisor_processes.py."""

from __future__ import annotations

from prometheus_client import REGISTRY

from ragmesh_cli.mesh.supervisor import RestartPolicy, Supervisor, describe_exit


class Children:
    """Fake children: ``exit(name, code)`` makes one die; ``start`` brings it back."""

    def __init__(self, names: list[str]) -> None:
        self.status: dict[str, int | None] = {name: None for name in names}
        self.starts: list[str] = []
        self.log: list[str] = []
        self.now = 0.0

    def exit(self, name: str, code: int) -> None:
        self.status[name] = code

    def start(self, name: str) -> None:
        self.starts.append(name)
        self.status[name] = None

    def supervisor(self, policy: RestartPolicy) -> Supervisor:
        return Supervisor(
            list(self.status), poll=self.status.get, start=self.start, healthy=lambda name: True,
            log_tail=lambda name: f"{name}: line 1\n{name}: Traceback: boom", policy=policy,
            log=self.log.append, clock=lambda: self.now,
        )


def restarts(service: str) -> float:
    return REGISTRY.get_sample_value("ragmesh_process_restarts_total", {"service": service}) or 0.0


def test_a_dead_child_is_reported_restarted_after_a_backoff_and_counted() -> None:
    children = Children(["runtime", "rerank", "gateway"])
    supervisor = children.supervisor(RestartPolicy(initial_backoff_s=0.5))
    before = restarts("rerank")
    children.exit("rerank", -9)
    assert supervisor.check() is None
    assert children.starts == []  # not at once: after the backoff
    report = children.log[-1]
    assert report.startswith("rerank killed by SIGKILL; restarting it in 0.50s")
    assert "rerank: Traceback: boom" in report, "the child's last log lines are in the report"
    assert restarts("rerank") == before + 1
    children.now = 0.6
    assert supervisor.check() is None
    assert children.starts == ["rerank"], "only the dead child is started; the others keep serving"
    children.now = 0.7
    supervisor.check()
    assert children.log[-1].startswith("rerank is back")


def test_the_backoff_doubles_per_crash_up_to_its_bound() -> None:
    policy = RestartPolicy(initial_backoff_s=0.25, max_backoff_s=2.0, max_restarts=10, window_s=1000)
    assert [policy.backoff(n) for n in range(1, 7)] == [0.25, 0.5, 1.0, 2.0, 2.0, 2.0]
    children = Children(["generation"])
    supervisor = children.supervisor(policy)
    delays = []
    for _ in range(5):
        children.exit("generation", 1)
        supervisor.check()
        delays.append(children.log[-1].split("restarting it in ")[1].split("s ")[0])
        children.now += 10
        supervisor.check()  # the restart
    assert delays == ["0.25", "0.50", "1.00", "2.00", "2.00"]


def test_crashes_outside_the_window_are_forgotten() -> None:
    children = Children(["rerank"])
    supervisor = children.supervisor(RestartPolicy(initial_backoff_s=1, max_restarts=2, window_s=60))
    for _ in range(6):  # one crash a minute never adds up to "repeatedly"
        children.exit("rerank", 1)
        assert supervisor.check() is None
        assert "restarting it in 1.00s" in children.log[-1]
        children.now += 61
        supervisor.check()


def test_a_child_crashing_repeatedly_stops_the_mesh() -> None:
    children = Children(["runtime", "indexer"])
    supervisor = children.supervisor(RestartPolicy(initial_backoff_s=0.1, max_restarts=3, window_s=60))
    reasons = []
    for _ in range(4):
        children.exit("indexer", 2)
        reasons.append(supervisor.check())
        children.now += 1
        supervisor.check()
    assert reasons[:3] == [None, None, None]
    assert reasons[3] == "indexer keeps crashing (4 times within 60s)"
    assert "giving up" in children.log[-1] and "indexer: Traceback: boom" in children.log[-1]
    assert children.starts == ["indexer"] * 3


def test_exit_statuses_are_described() -> None:
    assert describe_exit(-15) == "killed by SIGTERM"
    assert describe_exit(3) == "exited with code 3"
