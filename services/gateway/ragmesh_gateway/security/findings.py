"""What the injection guard reports: findings per text and a summary per response.

A finding never carries the text it matched, only offsets and a short hash, so findings can be
logged, counted and returned to clients without leaking document content.
"""

from __future__ import annotations

import enum
import hashlib
from dataclasses import dataclass, field
from typing import Literal
from collections.abc import Iterable


class Severity(enum.StrEnum):
    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {Severity.LOW: 1, Severity.MEDIUM: 2, Severity.HIGH: 3}


def max_severity(severities: Iterable[Severity]) -> Severity | None:
    return max(severities, key=lambda s: s.rank, default=None)


def excerpt_hash(excerpt: str) -> str:
    """First 16 hex digits of the span's sha256: enough to correlate repeats, not to read them."""
    return hashlib.sha256(excerpt.encode("utf-8", "surrogatepass")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Finding:
    """One suspicious span. ``start``/``end`` are offsets into the *original* text (end exclusive)."""

    rule_id: str
    severity: Severity
    start: int
    end: int
    excerpt_hash: str


@dataclass(frozen=True, slots=True)
class GuardResult:
    """The neutralized text, what was found in it, and whether the text differs from the input."""

    text: str
    findings: list[Finding] = field(default_factory=list)
    changed: bool = False

    @property
    def max_severity(self) -> Severity | None:
        return max_severity(f.severity for f in self.findings)


@dataclass(frozen=True, slots=True)
class FindingsSummary:
    """The findings over many guard results: retrieved text is always untrusted, findings or not.
    (The public DTO built from it is ``search.schemas.SecuritySummary``.)"""

    trust: Literal["untrusted"] = "untrusted"
    findings_count: int = 0
    max_severity: Severity | None = None
    rules: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, results: Iterable[GuardResult]) -> FindingsSummary:
        findings = [f for result in results for f in result.findings]
        return cls(
            findings_count=len(findings),
            max_severity=max_severity(f.severity for f in findings),
            rules=sorted({f.rule_id for f in findings}),
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "trust": self.trust,
            "findings_count": self.findings_count,
            "max_severity": self.max_severity.value if self.max_severity else None,
            "rules": list(self.rules),
        }
