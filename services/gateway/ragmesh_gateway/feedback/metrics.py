"""The feedback Prometheus counter (name fixed by the brief's conventions)."""

from __future__ import annotations

from prometheus_client import Counter

FEEDBACK = Counter(
    "ragmesh_feedback_total",
    "Answer feedback received, by rating (up = 1, down = -1).",
    ["rating"],
)

# Zero series for both ratings: a labelled counter exports nothing until a label set is used.
for _rating in ("up", "down"):
    FEEDBACK.labels(rating=_rating)


def count_feedback(rating: int) -> None:
    FEEDBACK.labels(rating="up" if rating > 0 else "down").inc()
