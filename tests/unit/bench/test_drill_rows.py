"""A drill's row names the cause of every flag its outage does not imply (libs/ragmesh_bench/drills.py):
the CI failure of the generation drill said only "embedding 1"; its row now says which request and
what retrieval's embeddings span gave as the reason."""

from __future__ import annotations

import json
from types import SimpleNamespace

from ragmesh_bench.drill_mesh import Sample
from ragmesh_bench.drills import DRILLS, unplanned
from ragmesh_common.span_file import default_span_file


def _span(trace: str, span: str, service: str, name: str, parent: str | None, status: str = "UNSET",
          **attributes) -> dict:
    return {"service": service, "name": name, "kind": "SERVER" if parent is None else "CLIENT", "trace_id": trace,
            "span_id": span, "parent_id": parent, "start_ns": 1_000_000_000, "end_ns": 1_012_500_000,
            "status": status, "attributes": attributes}


def test_a_flag_beyond_the_drill_comes_with_the_reason_the_mesh_recorded(tmp_path) -> None:
    spans = default_span_file(tmp_path)
    spans.parent.mkdir(parents=True)
    records = [
        _span("t1", "a1", "ragmesh-gateway", "POST /api/rag/v1/search", None, "ERROR",
              **{"ragmesh.request_id": "r-stray", "ragmesh.degraded": ["embedding"]}),
        _span("t1", "a2", "ragmesh-retrieval", "embeddings", "a1", **{"ragmesh.degraded": "UNAVAILABLE"}),
        _span("t1", "a3", "ragmesh-retrieval", "qdrant.query_points", "a1"),
        _span("t2", "b1", "ragmesh-gateway", "POST /api/rag/v1/chat", None, "ERROR",
              **{"ragmesh.request_id": "r-planned", "ragmesh.degraded": ["generation"]}),
    ]
    spans.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    generation = next(d for d in DRILLS if d.name == "generation")
    samples = [Sample(0, 1, "chat", 200, degraded=("generation",), request_id="r-planned"),
               Sample(1, 2, "search", 200, degraded=("embedding",), request_id="r-stray")]
    rows = unplanned(SimpleNamespace(state=tmp_path), samples, generation)
    assert rows == [{"op": "search", "flags": ["embedding"], "request_id": "r-stray", "why": [
        {"service": "ragmesh-retrieval", "span": "embeddings", "reason": "UNAVAILABLE", "ms": 12.5}]}]
