"""The rate limiter's Prometheus counter (name fixed by the brief's conventions)."""

from __future__ import annotations

from prometheus_client import Counter

from ragmesh_gateway.access.ports import RouteClass

RATE_LIMITED = Counter(
    "ragmesh_rate_limited_total",
    "Requests refused by the rate limiter, by route class.",
    ["route_class"],
)

# Zero series for the label values known up front: a labelled counter exports nothing until a label
# set is used, so the dashboards would show "No data" instead of 0 and rate() would miss the first event.
for _route_class in RouteClass:
    RATE_LIMITED.labels(route_class=_route_class.value)


def count_rate_limited(route_class: str) -> None:
    RATE_LIMITED.labels(route_class=route_class).inc()
