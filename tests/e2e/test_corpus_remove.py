"""`ragmesh corpus remove`: a corpus indexed by mistake is retired, with a dry run first, and what it
served is gone from search and from batch-get (a stable 4xx with a code, never a 500) (issue 15).

Runs on the session's mesh with a small corpus of its own, indexed and removed here, so the corpus
the other end-to-end tests search is never touched.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from ragmesh_common.index_schema import alias_name, collection_name, index_version_of

pytestmark = pytest.mark.e2e

CORPUS = "zorblax@1.0"
QUERY = "At what frequency does the zorblax harmonic converter hum?"
DOCUMENT = """# Zorblax harmonic converter

The zorblax harmonic converter hums at four hundred and seventeen hertz when it is idle.

## Maintenance

Oil the zorblax bearings every ninety days, and never while the converter hums.
"""


def ragmesh(mesh, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragmesh_cli.main", *args], capture_output=True, text=True,
                          timeout=300, env=mesh.env(), stdin=subprocess.DEVNULL)


def search(mesh) -> list[dict]:
    resp = httpx.post(f"{mesh.gateway_url}/api/rag/v1/search", json={"query": QUERY, "top_k": 8}, timeout=60)
    assert resp.status_code == 200, resp.text
    return [r for r in resp.json()["results"] if r["corpus"] == CORPUS]


def batch_get(mesh, ids: list[str], index_version: str | None) -> httpx.Response:
    return httpx.post(f"{mesh.gateway_url}/api/rag/v1/chunks/batch-get",
                      json={"chunk_ids": ids, "index_version": index_version}, timeout=60)


def wait_for(predicate, timeout_s: float = 15.0):
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return value


def test_corpus_remove_dry_run_then_remove(mesh, indexed_public, tmp_path: Path) -> None:
    folder = tmp_path / "zorblax"
    folder.mkdir()
    (folder / "converter.md").write_text(DOCUMENT, encoding="utf-8")
    indexed_public(mesh, folder, "zorblax", "1.0")
    hits = wait_for(lambda: search(mesh))
    assert hits, "the new corpus is not searched"
    version = hits[0]["index_version"]
    ids = [h["chunk_id"] for h in hits]

    dry = ragmesh(mesh, "corpus", "remove", CORPUS, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["dry_run"] is True and plan["corpus"] == CORPUS
    assert [v["index_version"] for v in plan["versions"]] == [index_version_of(version)], plan
    assert plan["versions"][0]["state"] == "active" and plan["versions"][0]["chunks"] >= len(ids)
    assert plan["alias"] == alias_name(CORPUS) and plan["versions"][0]["collection"] == collection_name(
        CORPUS, index_version_of(version)), plan
    assert "dry run: would remove" in dry.stderr and "nothing changed" in dry.stderr, dry.stderr
    assert search(mesh), "a dry run removed something"

    removed = ragmesh(mesh, "corpus", "remove", CORPUS)
    assert removed.returncode == 0, removed.stderr
    done = json.loads(removed.stdout)
    assert done["dry_run"] is False and done["collections_deleted"] == [plan["versions"][0]["collection"]]
    assert f"removed {CORPUS}" in removed.stderr, removed.stderr
    assert wait_for(lambda: not search(mesh)), "a removed corpus is still searched"

    # Its chunk ids: pinned to its index version, a stable 410 with a code; unpinned, missing.
    pinned = batch_get(mesh, ids, version)
    assert pinned.status_code == 410 and pinned.json()["code"] == "INDEX_VERSION_GONE", pinned.text
    unpinned = batch_get(mesh, ids, None)
    assert unpinned.status_code == 200, unpinned.text
    assert unpinned.json()["chunks"] == [] and sorted(unpinned.json()["missing"]) == sorted(ids)
    got = ragmesh(mesh, "get", *ids, "--index-version", version, "--url", mesh.gateway_url)
    assert got.returncode == 2 and "INDEX_VERSION_GONE" in got.stderr, got.stderr
    corpora = httpx.get(f"{mesh.gateway_url}/api/rag/v1/corpora", timeout=30).json()
    assert CORPUS not in json.dumps(corpora)

    # The indexer no longer knows it: status and a second remove are a clear NOT_FOUND.
    status = ragmesh(mesh, "index", "status", "--corpus", CORPUS)
    again = ragmesh(mesh, "corpus", "remove", CORPUS)
    for refused in (status, again):
        assert refused.returncode == 2 and "NOT_FOUND" in refused.stderr and "Traceback" not in refused.stderr

    # Indexing it again later starts afresh.
    indexed_public(mesh, folder, "zorblax", "1.0")
    assert wait_for(lambda: search(mesh)), "a re-added corpus is not searched"
    cleanup = ragmesh(mesh, "corpus", "remove", CORPUS)
    assert cleanup.returncode == 0, cleanup.stderr
