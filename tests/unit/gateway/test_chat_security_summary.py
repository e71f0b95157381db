"""The chat's security summary counts what the visitor is shown: the cited sources only."""

from __future__ import annotations

from gateway_fakes import make_chunk
from ragmesh_gateway.chat.ports import AnswerSources
from ragmesh_gateway.chat.presenters import event_payload
from ragmesh_gateway.chat.service import ChatSession
from ragmesh_gateway.search.service import GuardedChunk, GuardReport, RankedSource
from ragmesh_gateway.security.findings import Finding, GuardResult, FindingsSummary, Severity


def source(n: int, findings: int) -> RankedSource:
    found = [Finding("instruction_override", Severity.HIGH, 0, 5, "h") for _ in range(findings)]
    return RankedSource(f"S{n}", GuardedChunk(make_chunk(n), ("instruction_override",) if findings else (),
                                              (GuardResult("text", found, bool(found)),)), {})


def test_an_uncited_flagged_candidate_is_not_counted() -> None:
    clean, flagged = source(1, 0), source(2, 2)
    # Search saw both: the whole retrieval reports two findings.
    report = GuardReport(FindingsSummary.of([r for s in (clean, flagged) for r in s.guarded.results]), ["S2"])
    session = ChatSession(outcome=type("Outcome", (), {"security": report})(), model="", session_id=None,
                          events=None)  # type: ignore[arg-type]
    _, shown = event_payload(AnswerSources([clean]), session, "req")
    assert shown.security.findings_count == 0 and shown.security.flagged_sources == []
    assert shown.security.rules == [] and shown.security.max_severity is None
    _, both = event_payload(AnswerSources([flagged, clean]), session, "req")
    assert both.security.findings_count == 2 and both.security.flagged_sources == ["S2"]
    assert both.security.max_severity == "high"
