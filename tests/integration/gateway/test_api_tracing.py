"""Gateway HTTP spans and the downstream gRPC spans of one request share one trace id."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def test_one_trace_from_http_to_grpc_servers(tmp_path: Path) -> None:
    trace_file = tmp_path / "spans.jsonl"
    env = {**os.environ, "RAGMESH_TRACE_FILE": str(trace_file), "PYTHONPATH": str(HERE)}
    done = subprocess.run(
        [sys.executable, str(HERE / "gateway_trace_probe.py")],
        env=env,
        capture_output=True,
        timeout=120,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    spans = [json.loads(line) for line in trace_file.read_text().splitlines() if line.strip()]

    http_server = [
        s
        for s in spans
        if s["kind"] == "SERVER"
        and s["attributes"].get("http.method") == "POST"
        or s["kind"] == "SERVER"
        and s["attributes"].get("http.request.method") == "POST"
    ]
    assert len(http_server) == 1, [(s["name"], s["kind"]) for s in spans]
    trace_id = http_server[0]["trace_id"]
    assert http_server[0]["attributes"]["ragmesh.request_id"] == "trace-probe-1"

    grpc_client = [s for s in spans if s["kind"] == "CLIENT" and "ragmesh.v1." in s["name"]]
    grpc_server = [s for s in spans if s["kind"] == "SERVER" and "ragmesh.v1." in s["name"]]
    assert {s["name"].rsplit("/", 1)[-1] for s in grpc_server} >= {"Search", "Rerank"}
    assert all(s["trace_id"] == trace_id for s in grpc_client + grpc_server)
    # Each downstream server span is a child of a gateway client span.
    client_ids = {s["span_id"] for s in grpc_client}
    assert all(s["parent_id"] in client_ids for s in grpc_server)
