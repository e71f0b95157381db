"""Prometheus counters of the gateway's security layer (names fixed by the brief's conventions)."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import Counter

from ragmesh_gateway.access import RouteClass
from ragmesh_gateway.security.findings import Finding

INJECTION_FINDINGS = Counter(
    "ragmesh_injection_findings_total",
    "Prompt-injection findings in retrieved text, by rule and severity.",
    ["rule", "severity"],
)
RATE_LIMITED = Counter(
    "ragmesh_rate_limited_total",
    "Requests refused by the rate limiter, by route class.",
    ["route_class"],
)

FEEDBACK = Counter(
    "ragmesh_feedback_total",
    "Answer feedback received, by rating (up = 1, down = -1).",
    ["rating"],
)


# Zero series for the label values known up front: a labelled counter exports nothing until a label
# set is used, so the dashboards would show "No data" instead of 0 and rate() would miss the first event.
for _route_class in RouteClass:
    RATE_LIMITED.labels(route_class=_route_class.value)
for _rating in ("up", "down"):
    FEEDBACK.labels(rating=_rating)


def count_injection_findings(findings: Sequence[Finding]) -> None:
    """``InjectionGuard(on_findings=count_injection_findings)`` wires the guard to Prometheus."""
    for finding in findings:
        INJECTION_FINDINGS.labels(rule=finding.rule_id, severity=finding.severity.value).inc()


def count_rate_limited(route_class: str) -> None:
    RATE_LIMITED.labels(route_class=route_class).inc()


def count_feedback(rating: int) -> None:
    FEEDBACK.labels(rating="up" if rating > 0 else "down").inc()
