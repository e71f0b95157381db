"""Contract of deploy/observability: Prometheus scrapes every service, traces reach Tempo, Grafana's
datasources link traces and metrics, and the dashboards query only the metrics the services promise
(deploy/observability/METRICS.md, itself a subset of the metric names fixed in the brief).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "deploy/observability"
GRAFANA = OBSERVABILITY / "grafana"

# The metric names and labels the brief fixes for every service (the contract the code implements).
# A label set of None means the brief names no labels for that metric.
BRIEF_METRICS: dict[str, set[str] | None] = {
    "ragmesh_http_requests_total": {"service", "route", "method", "status"},
    "ragmesh_http_request_duration_seconds": None,
    "ragmesh_grpc_server_requests_total": {"service", "method", "code"},
    "ragmesh_grpc_server_duration_seconds": {"service", "method"},
    "ragmesh_retrieval_stage_duration_seconds": {"stage"},
    "ragmesh_generation_ttft_seconds": None,
    "ragmesh_degraded_total": {"service", "component"},
    "ragmesh_rate_limited_total": {"route_class"},
    "ragmesh_active_index_info": {"corpus", "index_version"},
    "ragmesh_injection_findings_total": {"rule", "severity"},
    "ragmesh_runtime_requests_total": {"endpoint"},
    "ragmesh_feedback_total": {"rating"},
}
# Labels the dashboards may use on a metric for which the brief names none; documented in METRICS.md.
ASSUMED_LABELS = {"ragmesh_http_request_duration_seconds": {"route"}}
_HISTOGRAM_SUFFIX = re.compile(r"_(bucket|count|sum)$")


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def dashboards() -> dict[str, dict[str, Any]]:
    return {
        p.name: json.loads(p.read_text(encoding="utf-8"))
        for p in sorted((GRAFANA / "dashboards").glob("*.json"))
    }


def all_queries() -> list[str]:
    queries = [
        target["expr"]
        for dashboard in dashboards().values()
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
    ]
    datasources = load_yaml(GRAFANA / "provisioning/datasources/ragmesh.yml")["datasources"]
    for source in datasources:
        queries += [
            q["query"] for q in source.get("jsonData", {}).get("tracesToMetrics", {}).get("queries", [])
        ]
    return queries


def metric_names(query: str) -> set[str]:
    """Metric names in a query, histogram series (_bucket, _count, _sum) folded into their histogram."""
    names = set()
    for name in re.findall(r"\bragmesh_[a-z0-9_]+", query):
        names.add(name if name in BRIEF_METRICS else _HISTOGRAM_SUFFIX.sub("", name))
    return names


def metrics_md_section(heading: str) -> str:
    """The text of one ``## heading`` section of METRICS.md."""
    text = (OBSERVABILITY / "METRICS.md").read_text(encoding="utf-8")
    found = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert found, f"METRICS.md has no section {heading!r}"
    return found.group(1)


def documented_metrics() -> set[str]:
    """The metrics METRICS.md lists for the dashboards."""
    return set(re.findall(r"^\| `(ragmesh_[a-z0-9_]+)`", metrics_md_section("Dashboards"), re.M))


# --- Prometheus ---------------------------------------------------------------------------------------


def test_prometheus_scrapes_every_ragmesh_service_on_its_metrics_port() -> None:
    from ragmesh_common.settings import DEFAULT_PORTS, METRICS_PORTS

    config = load_yaml(OBSERVABILITY / "prometheus.yml")
    assert {"global", "scrape_configs"} <= set(config)
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert len(jobs) == len(config["scrape_configs"]), "duplicate job names"
    # HTTP services serve /metrics on their own port; gRPC services on their metrics port.
    expected = {**{n: DEFAULT_PORTS[n] for n in ("gateway", "runtime")}, **METRICS_PORTS}
    for service, port in expected.items():
        (discovery,) = jobs[service]["dns_sd_configs"]
        assert discovery["names"] == [service] and discovery["type"] == "A" and discovery["port"] == port
        assert jobs[service].get("metrics_path", "/metrics") == "/metrics"


@pytest.mark.needs_program("promtool")
def test_promtool_accepts_the_prometheus_config(promtool: str) -> None:
    result = subprocess.run([promtool, "check", "config", str(OBSERVABILITY / "prometheus.yml")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.needs_program("promtool")
def test_every_dashboard_query_is_valid_promql(tmp_path: Path, promtool: str) -> None:
    # promtool parses PromQL in rule files; each query becomes a recording rule, with Grafana's
    # variables replaced by what Grafana would send.
    def as_promql(query: str) -> str:
        query = query.replace("$$", "$").replace("$__tags", 'service="retrieval"')
        query = query.replace("$__rate_interval", "1m")
        return re.sub(r"\$\{?\w+\}?", "retrieval", query)

    queries = all_queries()
    rules = {"groups": [{"name": "dashboards", "rules": [
        {"record": f"ragmesh:dashboard_query_{index}", "expr": as_promql(query)}
        for index, query in enumerate(queries)
    ]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    result = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(queries)} rules found" in result.stdout


def test_prometheus_targets_only_services_that_exist_in_compose() -> None:
    core = load_yaml(ROOT / "deploy/compose.core.yml")["services"]
    gpu = load_yaml(ROOT / "deploy/compose.gpu.yml")["services"]
    for job in load_yaml(OBSERVABILITY / "prometheus.yml")["scrape_configs"]:
        for discovery in job.get("dns_sd_configs", []):
            for name in discovery["names"]:
                assert name in core or name in gpu, f"job {job['job_name']} scrapes unknown {name}"
    # Exemplars (trace links on latency panels) need this flag.
    assert "--enable-feature=exemplar-storage" in core["prometheus"]["command"]


# --- traces -------------------------------------------------------------------------------------------


def test_the_collector_sends_traces_to_tempo_and_tempo_accepts_them() -> None:
    collector = load_yaml(OBSERVABILITY / "otel-collector.yaml")
    traces = collector["service"]["pipelines"]["traces"]
    assert traces["receivers"] == ["otlp"]
    assert collector["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"] == "0.0.0.0:4317"
    for processor in traces["processors"]:
        assert processor in collector["processors"]
    assert traces["processors"][0] == "memory_limiter" and traces["processors"][-1] == "batch"
    (exporter,) = traces["exporters"]
    assert collector["exporters"][exporter]["endpoint"] == "tempo:4317"
    tempo = load_yaml(OBSERVABILITY / "tempo.yaml")
    assert tempo["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert tempo["server"]["http_listen_port"] == 3200
    assert tempo["storage"]["trace"]["wal"]["path"].startswith("/var/tempo/")
    services = load_yaml(ROOT / "deploy/compose.core.yml")["services"]
    assert services["gateway"]["environment"]["RAGMESH_OTLP_ENDPOINT"] == "http://otel-collector:4317"


def test_the_collector_drops_attributes_that_may_carry_user_text() -> None:
    actions = load_yaml(OBSERVABILITY / "otel-collector.yaml")["processors"]["attributes/scrub"]["actions"]
    deleted = {a["key"] for a in actions if a["action"] == "delete"}
    assert {"db.statement", "url.query", "http.request.header.authorization"} <= deleted


# --- Grafana ------------------------------------------------------------------------------------------


def test_datasources_link_exemplars_to_tempo_and_traces_to_metrics() -> None:
    sources = {
        s["uid"]: s for s in load_yaml(GRAFANA / "provisioning/datasources/ragmesh.yml")["datasources"]
    }
    assert sources["prometheus"]["url"] == "http://prometheus:9090"
    assert sources["tempo"]["url"] == "http://tempo:3200"
    destinations = sources["prometheus"]["jsonData"]["exemplarTraceIdDestinations"]
    assert destinations == [{"name": "trace_id", "datasourceUid": "tempo"}]
    assert sources["tempo"]["jsonData"]["tracesToMetrics"]["datasourceUid"] == "prometheus"
    # Grafana expands $VARS in provisioning files: its own $__tags must be written $$__tags.
    for query in sources["tempo"]["jsonData"]["tracesToMetrics"]["queries"]:
        assert "$$__tags" in query["query"] and "{$__tags" not in query["query"]


def test_the_dashboard_provider_reads_the_folder_compose_mounts() -> None:
    (provider,) = load_yaml(GRAFANA / "provisioning/dashboards/ragmesh.yml")["providers"]
    volumes = load_yaml(ROOT / "deploy/compose.core.yml")["services"]["grafana"]["volumes"]
    assert f"./observability/grafana/dashboards:{provider['options']['path']}:ro" in volumes


@pytest.mark.parametrize("name", ["ragmesh-service-health.json", "ragmesh-retrieval-answers.json"])
def test_dashboards_are_valid_and_every_panel_queries_prometheus(name: str) -> None:
    dashboard = dashboards()[name]
    assert dashboard["uid"] and dashboard["title"] and dashboard["panels"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        position = panel["gridPos"]
        assert 0 <= position["x"] and position["x"] + position["w"] <= 24, panel["title"]
        if panel["type"] == "row":
            continue
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
            assert metric_names(target["expr"]), f"{panel['title']} queries no ragmesh metric"
    variables = {v["name"] for v in dashboard["templating"]["list"]}
    used = set(re.findall(r"\$(\w+)", json.dumps([p.get("targets") for p in dashboard["panels"]])))
    assert used - {"__rate_interval", "__all"} <= variables, used - variables


def test_dashboards_cover_what_operators_watch() -> None:
    queries = " ".join(all_queries())
    for needle in (
        'status=~"5.."',
        'code!="OK"',
        "ragmesh_generation_ttft_seconds_bucket",
        "ragmesh_active_index_info",
        "ragmesh_degraded_total",
        "ragmesh_rate_limited_total",
        "ragmesh_injection_findings_total",
    ):
        assert needle in queries, needle
    stages = json.dumps(dashboards()["ragmesh-retrieval-answers.json"])
    assert "sum by (le, stage)" in stages


def test_dashboards_query_only_documented_metrics_with_their_labels() -> None:
    documented = documented_metrics()
    assert documented <= set(BRIEF_METRICS), documented - set(BRIEF_METRICS)
    used: set[str] = set()
    for query in all_queries():
        names = metric_names(query)
        used |= names
        assert names <= documented, f"{query}: {names - documented} not in METRICS.md"
        allowed = {"le"}
        for name in names:
            allowed |= BRIEF_METRICS[name] or set()
            allowed |= ASSUMED_LABELS.get(name, set())
        labels = set()
        for group in re.findall(r"\bby \(([^)]*)\)", query):
            labels |= {label.strip() for label in group.split(",") if label.strip()}
        labels |= set(re.findall(r"[{,]\s*(\w+)\s*(?:=~|!=|=)", query))
        assert labels <= allowed, f"{query}: labels {labels - allowed} are not part of the contract"
    assert used == documented, f"METRICS.md lists metrics no dashboard uses: {documented - used}"


def test_committed_dashboards_are_what_the_generator_writes() -> None:
    result = subprocess.run(
        [sys.executable, str(GRAFANA / "build_dashboards.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
