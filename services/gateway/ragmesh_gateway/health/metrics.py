"""Readiness as a Prometheus gauge, so an alert sees what /health/ready would answer.

The gateway sets it on every scrape of /metrics (and on every /health/ready), running the same
checks: a scrape is the only call Prometheus makes, and a gauge set only by someone else's probe
would go stale when nobody probes.
"""

from __future__ import annotations

from prometheus_client import Gauge

from ragmesh_gateway.health.service import SERVING, Readiness

READINESS_CHECK = Gauge(
    "ragmesh_gateway_readiness_check",
    "1 while the readiness check serves, 0 while it does not (any 0: /health/ready answers 503)",
    ["check"],
)


def publish(readiness: Readiness) -> None:
    for check, state in readiness.checks.items():
        READINESS_CHECK.labels(check).set(1 if state == SERVING else 0)
