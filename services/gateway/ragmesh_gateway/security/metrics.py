"""The guard's Prometheus counter: prompt-injection findings in retrieved text (names fixed by the
brief's conventions)."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client import Counter

from ragmesh_gateway.security.findings import Finding

INJECTION_FINDINGS = Counter(
    "ragmesh_injection_findings_total",
    "Prompt-injection findings in retrieved text, by rule and severity.",
    ["rule", "severity"],
)


def count_injection_findings(findings: Sequence[Finding]) -> None:
    """``InjectionGuard(on_findings=count_injection_findings)`` wires the guard to Prometheus."""
    for finding in findings:
        INJECTION_FINDINGS.labels(rule=finding.rule_id, severity=finding.severity.value).inc()
