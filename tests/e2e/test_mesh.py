"""The whole mesh, every hop real: runtime + five services as processes, indexed and queried."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest

from ragmesh_cli.gateway_client import stream_answer

pytestmark = pytest.mark.e2e

KNOWN = "The default queue depth of the Quokka scheduler is forty-two jobs per worker."
SOURCE = Path(__file__).resolve().parents[1] / "fixtures" / "e2e_corpus" / "guide" / "install.md"


def test_search_returns_the_chunk_with_exact_lines(mesh) -> None:
    resp = httpx.post(f"{mesh.gateway_url}/api/rag/v1/search",
                      json={"query": "What is the default queue depth of the scheduler?", "top_k": 5}, timeout=60)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    hits = [r for r in body["results"] if KNOWN in r["quote"]]
    assert hits, [r["quote"][:80] for r in body["results"]]
    hit = hits[0]
    assert hit["download_path"].endswith("guide/install.md") or "install" in hit["url"]
    start, end = hit["source_lines"]
    lines = SOURCE.read_text(encoding="utf-8").splitlines()
    cited = "\n".join(lines[start - 1:end])
    assert KNOWN in cited, (start, end)
    assert hit["quote"] in cited or cited in hit["quote"] or hit["quote"].strip() == cited.strip()
    assert body["results"][0]["source_id"] == "S1"


def test_chat_stream_orders_tokens_sources_done(mesh) -> None:
    events = []
    with httpx.Client(timeout=120) as client:
        with client.stream("POST", f"{mesh.gateway_url}/api/rag/v1/chat/stream",
                           json={"question": "What is the default queue depth of the Quokka scheduler?"}) as resp:
            assert resp.status_code == 200
            assert resp.headers.get("x-accel-buffering") == "no"
            name = None
            for line in resp.iter_lines():
                if line.startswith("event:"):
                    name = line.split(":", 1)[1].strip()
                elif line.startswith("data:") and name:
                    events.append((name, json.loads(line.split(":", 1)[1])))
                    name = None
    names = [n for n, _ in events]
    assert names[0] == "meta"
    assert names.count("done") + names.count("error") == 1 and names[-1] == "done", names
    tokens = [i for i, n in enumerate(names) if n == "token"]
    sources = names.index("sources")
    assert tokens and max(tokens) < sources < len(names) - 1
    answer = "".join(d["text"] for n, d in events if n == "token")
    assert "[S" in answer
    cited = events[sources][1]["sources"]
    assert cited and all(s["url"] and s["source_lines"] for s in cited)


def test_one_trace_spans_every_service(mesh) -> None:
    rid = f"trace-{time.time_ns()}"
    result = stream_answer(mesh.gateway_url, "How often do Quokka workers report heartbeats?",
                           headers={"X-Request-ID": rid}, timeout=120)
    assert result["terminal"] and result["terminal"]["event"] == "done"
    trace_file = mesh.state_dir / "traces" / "spans.jsonl"  # the embedded default's span file
    wanted = {"ragmesh-gateway", "ragmesh-retrieval", "ragmesh-rerank", "ragmesh-generation"}
    deadline = time.monotonic() + 15
    while True:
        spans = [json.loads(line) for line in trace_file.read_text().splitlines() if line.strip()]
        gateway_roots = [s for s in spans if s["service"] == "ragmesh-gateway"
                         and s["attributes"].get("ragmesh.request_id") == rid]
        if gateway_roots:
            trace_id = gateway_roots[0]["trace_id"]
            services = {s["service"] for s in spans if s["trace_id"] == trace_id}
            if wanted <= services or time.monotonic() > deadline:
                break
        elif time.monotonic() > deadline:
            pytest.fail("no gateway span carries the request id")
        time.sleep(0.5)
    assert wanted <= services, services


async def test_an_index_version_has_one_name_everywhere(mesh) -> None:
    """REST, MCP, the CLI and the metrics name the active index version alike (it used to be
    rm__<corpus>__v… in search results and v… everywhere else)."""
    import subprocess
    import sys

    from mcp import Client

    corpus = "quokka@1.0"  # the session mesh's corpus (other tests may add more)
    query = {"query": "queue depth", "top_k": 3, "filters": {"corpus": corpus}}
    search = httpx.post(f"{mesh.gateway_url}/api/rag/v1/search", json=query, timeout=60).json()
    listed = httpx.get(f"{mesh.gateway_url}/api/rag/v1/corpora", timeout=30).json()["corpora"]
    async with Client(f"{mesh.gateway_url}/mcp") as client:
        found = (await client.call_tool("search_articles", query)).structured_content
        corpora = (await client.call_tool("list_corpora", {})).structured_content["corpora"]
    cli = subprocess.run([sys.executable, "-m", "ragmesh_cli.main", "corpora", "--url", mesh.gateway_url],
                         capture_output=True, text=True, timeout=60)
    metrics = httpx.get(f"http://127.0.0.1:{mesh.ports.metrics_port('retrieval')}/metrics", timeout=30).text

    def active(listing: list[dict]) -> str:
        return next(c["active_index_version"] for c in listing if c["corpus"] == corpus)

    version = active(listed)
    assert version.startswith("v") and "__" not in version
    assert search["index_version"] == found["index_version"] == version
    assert {r["index_version"] for r in search["results"] + found["results"]} == {version}
    assert active(corpora) == version and active(json.loads(cli.stdout)["corpora"]) == version
    assert f'index_version="{version}"' in metrics
