"""Generation metrics (the shared ragmesh_degraded_total lives in ragmesh_common.metrics)."""

from __future__ import annotations

from prometheus_client import Counter, Histogram

TTFT = Histogram(
    "ragmesh_generation_ttft_seconds", "Time from request to the first verified text sent",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60),
)
ANSWERS = Counter("ragmesh_generation_answers", "Answers by final status", ["status"])
VERIFICATION_FAILURES = Counter(
    "ragmesh_generation_verification_failures", "Model outputs that failed citation checks", ["problem"]
)
ATTRIBUTIONS = Counter(
    "ragmesh_generation_attributions", "Uncited finished answers cited post hoc from the sources that hold them",
    ["outcome"],  # repaired | not_attributable
)
