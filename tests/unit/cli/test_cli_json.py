"""The CLI's JSON from indexer replies: counts are numbers, and zeros and empty lists are written."""

from __future__ import annotations

import json

from ragmesh.v1 import indexer_pb2
from ragmesh_cli.indexer_client import pb_json


def test_int64_counts_are_json_numbers_and_zeros_are_written() -> None:
    reply = indexer_pb2.BuildResponse(index_version="v1", documents=7, chunks=2**40, embedded=0, reused_vectors=18,
                                      files=[indexer_pb2.FileReport(path="a.md", status="indexed", chunks=3)])
    out = json.loads(json.dumps(pb_json(reply)))
    assert out["documents"] == 7 and out["chunks"] == 2**40 and out["reused_vectors"] == 18
    assert out["embedded"] == 0 and out["reused_existing"] is False and out["dry_run"] is False
    assert out["files"][0]["chunks"] == 3 and out["files"][0]["warnings"] == []


def test_nested_counts_are_numbers_too() -> None:
    status = indexer_pb2.StatusResponse(
        corpus="docs@1", versions=[indexer_pb2.VersionInfo(index_version="v1", state="failed", chunks=0, documents=4)],
        in_progress=[indexer_pb2.BuildProgress(index_version="v2", stage="embed", done=10, total=40)])
    out = pb_json(status)
    assert out["versions"][0]["chunks"] == 0 and out["versions"][0]["documents"] == 4
    assert out["in_progress"] == [{"index_version": "v2", "stage": "embed", "done": 10, "total": 40}]
    assert out["active_version"] == ""
