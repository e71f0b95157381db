"""The product as an operator runs it: the Compose stack (deploy/compose.core.yml + compose.ci.yml),
every request through nginx's published port, every administrative step the documented command.

The checks run in this order and share one stack: index a corpus (twice: the second run is a no-op),
make the first token, search, stream an answer, call MCP tools, measure the shared rate limit, crash
rerank, generation and the runtime while requests flow, restart retrieval; then look back over the
whole run for 5xx answers and for questions or tokens in any container's log.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid

import httpx
import pytest

from compose_stack import CORPUS, NONCE, QUESTION, ROOT, Stack
from compose_traffic import Traffic, burst, parse_sse

pytestmark = pytest.mark.compose

CORPUS_DIR = ROOT / "tests/fixtures/e2e_corpus"
SENTENCE = "The default queue depth of the Quokka scheduler is forty-two jobs per worker."


def index_job(stack: Stack) -> dict:
    result = stack.project.run("--profile", "job", "run", "--rm", "-T", "index-job", "--corpus", "/corpora/quokka",
                             "--visibility", "public")
    return json.loads(result.stdout)


def wait_ready(stack: Stack, timeout: float = 60) -> None:
    # /health/ready answers 503 until a corpus is served: a state, not a failed request, so this
    # client is not one of the stack's recorded ones.
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=stack.base_url, timeout=30) as http:
        while http.get("/health/ready").status_code != 200:
            assert time.monotonic() < deadline, http.get("/health/ready").text
            time.sleep(0.5)


def test_the_index_job_activates_a_version_and_a_second_run_changes_nothing(stack: Stack, report: dict) -> None:
    first = index_job(stack)
    version = first["build"]["index_version"]
    assert first["validation"]["passed"] is True
    # A first version: nothing was active before it (the CLI writes every field, empty ones too).
    assert first["promote"] == {"corpus": CORPUS, "active_version": version, "previous_version": "",
                                "changed": True}

    again = index_job(stack)
    assert again["build"]["index_version"] == version and again["build"]["reused_existing"] is True
    assert again["promote"]["active_version"] == version and not again["promote"].get("changed")
    stack.facts["index_version"] = version  # the same name in the CLI, REST and MCP
    wait_ready(stack)
    report["memory_after_indexing"] = stack.project.memory()


def test_the_first_token_is_made_the_documented_way_and_opens_search(stack: Stack) -> None:
    with stack.client() as anonymous:
        refused = anonymous.post("/api/rag/v1/search", json={"query": QUESTION})
    assert refused.status_code == 401 and refused.json()["code"] == "UNAUTHENTICATED"
    assert refused.headers["www-authenticate"].startswith("Bearer")

    token = stack.create_token("compose-test", "rag:search", "rag:read", "rag:answer")
    assert re.fullmatch(r"rmk_[0-9a-f]+_\S+", token)
    with stack.client(token) as http:
        allowed = http.post("/api/rag/v1/search", json={"query": QUESTION})
    assert allowed.status_code == 200, allowed.text
    stack.facts["token"] = token


def test_search_cites_the_exact_lines_of_a_known_sentence(stack: Stack) -> None:
    lines = (CORPUS_DIR / "guide/install.md").read_text(encoding="utf-8").splitlines()
    sentence_line = lines.index(SENTENCE) + 1
    with stack.client(stack.facts["token"]) as http:
        body = http.post("/api/rag/v1/search", json={"query": QUESTION, "top_k": 3}).json()
        top = body["results"][0]
        served = http.get(top["download_path"])
    assert body["degraded"] == [] and body["index_version"] == stack.facts["index_version"]
    assert (top["corpus"], top["source_path"]) == (CORPUS, "guide/install.md")
    first, last = top["source_lines"]
    assert first <= sentence_line <= last
    # The quote is those lines, exactly, of the file as indexed and as the gateway serves it.
    assert top["quote"] == "\n".join(lines[first - 1:last]).strip()
    assert served.status_code == 200 and served.text.splitlines()[first - 1:last] == lines[first - 1:last]


def test_chat_streams_meta_tokens_sources_and_exactly_one_done(stack: Stack) -> None:
    with stack.client(stack.facts["token"]) as http:
        with http.stream("POST", "/api/rag/v1/chat/stream", json={"question": QUESTION}) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            events = parse_sse(response.read().decode())
    names = [name for name, _ in events]
    assert names[0] == "meta" and names[-2:] == ["sources", "done"] and names.count("done") == 1
    assert set(names[1:-2]) == {"token"}, names
    answer = "".join(data["text"] for name, data in events if name == "token")
    assert "forty-two" in answer
    done = events[-1][1]
    assert done["answer_status"] == "answered" and done["degraded"] == []
    assert events[-2][1]["sources"][0]["source_path"] == "guide/install.md"


async def test_mcp_lists_and_calls_tools_through_the_official_client(stack: Stack) -> None:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {stack.facts['token']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as http:
        async with Client(streamable_http_client(f"{stack.base_url}/mcp", http_client=http)) as client:
            tools = {tool.name for tool in (await client.list_tools()).tools}
            found = await client.call_tool("search_articles", {"query": QUESTION, "top_k": 2})
    assert {"search_articles", "answer_from_articles", "get_article_chunks"} <= tools
    assert not found.is_error
    top = found.structured_content["results"][0]
    assert top["source_path"] == "guide/install.md" and SENTENCE in top["quote"]


def test_both_gateway_replicas_share_one_rate_limit_budget(stack: Stack, report: dict) -> None:
    gateway = stack.project.config()["services"]["gateway"]
    limits = dict(item.split("=") for item in gateway["environment"]["RAGMESH_RATE_LIMITS"].split(","))
    rate, burst_size = (float(x) for x in limits.get("read", limits["*"]).split("/"))
    token = stack.create_token("compose-rate-limit", "rag:read")  # a sender with a bucket of its own
    seconds, prefix = 10.0, f"rl-{uuid.uuid4().hex[:12]}-"
    # 4 x 50 requests/s: ten times the budget and four times nginx's flood guard (50 r/s per address),
    # so both limits are reached, and few enough that nginx's log of them stays whole.
    counts = asyncio.run(burst(stack.base_url, "/api/rag/v1/corpora", token, seconds=seconds, connections=4,
                               request_id_prefix=prefix, per_connection_rps=50))
    stack.statuses.extend(("GET", "/api/rag/v1/corpora", status) for status, n in counts.items() for _ in range(n))

    # nginx's access log names the replica that answered each request; a 429 of nginx's own flood
    # guard (50 r/s per address, deploy/nginx/nginx.conf) has no upstream.
    admitted_by: dict[str, int] = {}
    refused_by_gateways = 0
    for line in stack.project.logs("nginx").splitlines():
        if prefix not in line or not line.startswith("{"):
            continue
        entry = json.loads(line)
        if entry["status"] == 200:
            admitted_by[entry["upstream_addr"]] = admitted_by.get(entry["upstream_addr"], 0) + 1
        elif entry["status"] == 429 and entry["upstream_addr"]:
            refused_by_gateways += 1
    admitted = counts.get(200, 0)
    expected = burst_size + rate * seconds
    report["rate_limit"] = {
        "budget": f"{rate:g}/s, burst {burst_size:g} (RAGMESH_RATE_LIMITS, route class read)",
        "window_s": seconds, "expected": expected, "admitted": admitted,
        "deviation_pct": round(100 * (admitted - expected) / expected, 2),
        "admitted_per_replica": admitted_by, "refused_by_gateways": refused_by_gateways,
        "refused_by_nginx": counts.get(429, 0) - refused_by_gateways, "statuses": counts,
    }
    assert set(counts) <= {200, 429}, counts
    assert len(admitted_by) == 2 and all(n > 0 for n in admitted_by.values()), admitted_by  # both replicas
    assert sum(admitted_by.values()) == admitted
    assert admitted + refused_by_gateways >= 1.25 * expected, report["rate_limit"]  # demand above budget
    assert abs(admitted - expected) <= 0.02 * expected, report["rate_limit"]


# --- a crash of each downstream, while requests flow ---------------------------------------------------

# service: the flags a request of each kind must report (at least) while the service is down, the
# flags each kind may carry meanwhile (a kind not listed comes through untouched), and how often each
# kind is sent (within the compose rate limits: search 5/s, chat 0.5/s). The runtime comes back in
# about a second, and retrieval's embedding call rides that out (its 3 s deadline); the reranker
# loads its models for a few seconds more, so rerank is what a search reports then.
DRILLS = {
    "rerank": ({"search": {"rerank"}}, {"search": {"rerank"}, "chat": {"rerank"}}, {"search": 0.5, "chat": 4.0}),
    "generation": ({"chat": {"generation"}}, {"chat": {"generation"}}, {"search": 1.0, "chat": 2.5}),
    "runtime": ({"search": {"rerank"}},
                {"search": {"embedding", "rerank"}, "chat": {"embedding", "rerank", "generation"}},
                {"search": 0.5, "chat": 4.0}),
}


@pytest.mark.parametrize("service", list(DRILLS))
def test_a_crashed_service_degrades_answers_and_its_restart_policy_brings_it_back(
    stack: Stack, report: dict, service: str
) -> None:
    when_down, allowed, paces = DRILLS[service]
    affected = list(when_down)
    token = stack.create_token(f"compose-drill-{service}", "rag:search", "rag:answer")
    project = stack.project
    with Traffic(stack.base_url, token, QUESTION, paces) as traffic:
        time.sleep(3)
        restarts_before = project.crash(service)
        crashed = time.monotonic()
        for kind in affected:  # down for a second or two: less than a chat's pace
            traffic.rush(kind, 3)  # within each kind's rate-limit burst (chat 5, search 20)
        while project.state(service)["RestartCount"] == restarts_before:
            assert time.monotonic() - crashed < 60, f"{service} was not restarted: {project.state(service)}"
            time.sleep(0.2)
        restarted = time.monotonic()
        healthy = restarted + project.wait_healthy(service, timeout=240)

        def recovered() -> bool:
            after = traffic.since(healthy)
            return all(any(a.kind == kind and not a.degraded for a in after) for kind in affected)

        while not recovered():
            assert time.monotonic() < healthy + 120, f"answers did not recover after {service} came back"
            time.sleep(0.5)
    answers = traffic.answers
    stack.statuses.extend(("POST", a.kind, a.status) for a in answers)
    before = [a for a in answers if a.at < crashed - 1]
    outage = [a for a in answers if crashed <= a.at < healthy]  # the process is back only once healthy
    clean = [a.at for a in answers if a.at >= crashed and a.kind in affected and not a.degraded]
    report.setdefault("drills", {})[service] = {
        "requests": {kind: sum(1 for a in answers if a.kind == kind) for kind in paces},
        "degraded": {kind: sum(1 for a in answers if a.kind == kind and a.degraded) for kind in paces},
        "flags_while_down": sorted({",".join(sorted(a.degraded)) or "-" for a in outage}),
        "statuses": sorted({a.status for a in answers}),
        "restarted_after_s": round(restarted - crashed, 1),
        "healthy_after_s": round(healthy - crashed, 1),
        "first_clean_answer_after_s": round(min(clean) - crashed, 1),
    }
    assert not traffic.failures, traffic.failures
    assert all(a.status == 200 for a in answers), [(a.kind, a.status, a.code) for a in answers if a.status != 200]
    assert before and all(not a.degraded for a in before), before
    for answer in answers:
        assert answer.degraded <= allowed.get(answer.kind, set()), (service, answer)
        if answer.kind == "chat":
            terminal = [name for name in answer.events if name in ("done", "error")]
            assert answer.events[0] == "meta" and terminal == [answer.events[-1]], answer
            assert answer.events[-1] == "done" or "generation" in answer.degraded, answer
    for kind in affected:
        assert any(a.kind == kind and a.degraded >= when_down[kind] for a in outage), (
            f"no {kind} answered with {sorted(when_down[kind])} while {service} was down: {outage}")
    assert project.state(service)["RestartCount"] == restarts_before + 1


def test_restarting_retrieval_keeps_the_index(stack: Stack) -> None:
    stack.project.run("restart", "retrieval")
    stack.project.wait_healthy("retrieval", timeout=240)
    wait_ready(stack)
    with stack.client(stack.facts["token"]) as http:
        body = http.post("/api/rag/v1/search", json={"query": QUESTION, "top_k": 1}).json()
    assert body["index_version"] == stack.facts["index_version"], body
    assert body["results"][0]["source_path"] == "guide/install.md"


def test_prometheus_loads_the_alert_rules_that_promtool_tests(stack: Stack) -> None:
    """alerts.yml is unit-tested by promtool (tests/contract); here the stack's Prometheus loaded all of it."""
    import yaml

    source = yaml.safe_load((ROOT / "deploy/observability/alerts.yml").read_text(encoding="utf-8"))
    expected = {rule["alert"] for group in source["groups"] for rule in group["rules"]}
    answer = stack.project.run("exec", "-T", "prometheus", "wget", "-q", "-O", "-",
                               "http://127.0.0.1:9090/api/v1/rules?type=alert", timeout=60)
    groups = json.loads(answer.stdout)["data"]["groups"]
    loaded = {rule["name"] for group in groups for rule in group["rules"]}
    assert expected and loaded == expected, sorted(expected ^ loaded)
    assert all(rule["health"] == "ok" for group in groups for rule in group["rules"]), groups


def test_no_answer_was_a_5xx_and_no_log_holds_a_question_or_a_token(stack: Stack) -> None:
    failures = [entry for entry in stack.statuses if entry[2] >= 500]
    assert stack.statuses and not failures, failures
    logs = stack.project.logs()
    edge = [json.loads(line) for line in stack.project.logs("nginx").splitlines() if line.startswith("{")]
    assert edge and not [e for e in edge if e["status"] >= 500], [e for e in edge if e["status"] >= 500]
    assert NONCE not in logs, "a container logged a question"
    for token in stack.tokens:
        secret = token.split("_", 2)[2]  # rmk_<id>_<secret>
        assert token not in logs and secret not in logs, "a container logged a token"
