"""Contract of deploy/observability/alerts.yml: promtool accepts the rules and their unit tests
(alerts.test.yml) pass, every alert has a case that fires and one that does not, Prometheus loads
the file in Compose, the rules use only metrics METRICS.md lists and the code registers with the
labels they use, and each alert's runbook is a section of docs/operations.md.
"""

from __future__ import annotations

import importlib
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
OBSERVABILITY = ROOT / "deploy/observability"
ALERTS = OBSERVABILITY / "alerts.yml"
ALERT_TESTS = OBSERVABILITY / "alerts.test.yml"
# Every module that registers a Prometheus metric in the default registry (the runtime keeps its
# own registry and no rule uses it).
METRIC_MODULES = (
    "ragmesh_common.metrics",
    "ragmesh_common.heap",
    "ragmesh_retrieval.metrics",
    "ragmesh_generation.metrics",
    "ragmesh_gateway.security.metrics",
    "ragmesh_gateway.access.metrics",
    "ragmesh_gateway.feedback.metrics",
    "ragmesh_gateway.health.metrics",
    "ragmesh_indexer.metrics",
    "ragmesh_cli.mesh.supervisor",
)
# Labels Prometheus adds to every scraped series, and the histogram bucket label.
TARGET_LABELS = {"job", "instance"}
_HISTOGRAM_SERIES = re.compile(r"_(bucket|count|sum)$")


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def rules() -> list[dict[str, Any]]:
    return [rule for group in load(ALERTS)["groups"] for rule in group["rules"]]


def code_metrics() -> dict[str, set[str]]:
    """Exported metric name (counters with _total) -> label names, as the code registers them."""
    for module in METRIC_MODULES:
        importlib.import_module(module)
    exported: dict[str, set[str]] = {}
    # prometheus_client keeps no public map from a metric to its collector and label names.
    for name, collector in REGISTRY._names_to_collectors.items():  # noqa: SLF001
        if not name.startswith("ragmesh_"):
            continue
        base = getattr(collector, "_name", None) or name  # a custom collector: its family's name
        key = f"{base}_total" if getattr(collector, "_type", None) == "counter" else base
        # Counter, Gauge, Histogram keep _labelnames; the indexer's age collector names its own.
        labels = collector._labelnames if hasattr(collector, "_labelnames") else collector.labelnames  # noqa: SLF001
        exported[key] = set(labels)
    return exported


def metric_of(series: str) -> str:
    """A series name as METRICS.md lists it (histogram series folded into their histogram)."""
    known = code_metrics()
    return series if series in known else _HISTOGRAM_SERIES.sub("", series)


def documented() -> dict[str, set[str]]:
    """Every metric METRICS.md lists (all sections) -> the labels it names for it."""
    table = {}
    for name, labels in re.findall(r"^\| `(ragmesh_[a-z0-9_]+)` \| [^|]+ \| ([^|]+) \|",
                                   (OBSERVABILITY / "METRICS.md").read_text(encoding="utf-8"), re.M):
        table[name] = set(re.findall(r"`([a-z_]+)`", labels.split("(")[0]))
    return table


def selectors(expr: str) -> list[tuple[str, set[str]]]:
    """(series name, label names matched) for each ragmesh_ or up selector of a PromQL expression."""
    found = []
    for name, matchers in re.findall(r"\b(ragmesh_[a-z0-9_]+|up)\b(?:\{([^}]*)\})?", expr):
        found.append((name, set(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers or ""))))
    return found


@pytest.mark.needs_program("promtool")
def test_promtool_accepts_the_alert_rules(promtool: str) -> None:
    result = subprocess.run([promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules())} rules found" in result.stdout


@pytest.mark.needs_program("promtool")
def test_the_alert_rules_pass_their_unit_tests(promtool: str) -> None:
    result = subprocess.run([promtool, "test", "rules", ALERT_TESTS.name], cwd=OBSERVABILITY,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_every_alert_has_a_case_that_fires_and_one_that_does_not() -> None:
    tests = load(ALERT_TESTS)
    assert tests["rule_files"] == [ALERTS.name]
    fires: set[str] = set()
    quiet: set[str] = set()
    for case in tests["tests"]:
        for check in case.get("alert_rule_test", []):
            (fires if check.get("exp_alerts") else quiet).add(check["alertname"])
    alerts = {rule["alert"] for rule in rules()}
    assert len(alerts) == len(rules()), "every rule is an alert, each with its own name"
    assert alerts - fires == set(), "alerts no case expects to fire"
    assert alerts - quiet == set(), "alerts no case expects to stay quiet"
    assert fires | quiet <= alerts


def test_the_rules_cover_what_operators_alert_on() -> None:
    exprs = {rule["alert"]: rule["expr"] for rule in rules()}
    wanted = {
        "RagmeshGatewayErrorRate": 'status=~"5.."',
        "RagmeshDegradedAnswers": "ragmesh_degraded_total",
        "RagmeshSearchLatencyHigh": "histogram_quantile(0.99",
        "RagmeshGatewayNotReady": "ragmesh_gateway_readiness_check",
        "RagmeshIndexStale": "ragmesh_index_active_version_age_seconds",
        "RagmeshIndexBuildFailed": 'outcome="failed"',
    }
    for alert, needle in wanted.items():
        assert needle in exprs[alert], alert
    for rule in rules():
        assert rule["labels"]["severity"] in ("page", "warning"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]


def test_rules_use_only_documented_metrics_that_the_code_registers_with_those_labels() -> None:
    code = code_metrics()
    listed = documented()
    for rule in rules():
        expr = rule["expr"]
        used_labels: set[str] = set()
        allowed = {"le"} | TARGET_LABELS
        for series, labels in selectors(expr):
            if series == "up":
                assert labels <= TARGET_LABELS, rule["alert"]
                continue
            metric = metric_of(series)
            assert metric in listed, f"{rule['alert']}: {metric} is not in METRICS.md"
            assert metric in code, f"{rule['alert']}: no code registers {metric}"
            assert labels <= code[metric] | {"le"}, f"{rule['alert']}: {metric} has no labels {labels - code[metric]}"
            used_labels |= labels
            allowed |= code[metric]
        for group in re.findall(r"\b(?:by|without|ignoring|on)\s*\(([^)]*)\)", expr):
            used_labels |= {label.strip() for label in group.split(",") if label.strip()}
        assert used_labels <= allowed, f"{rule['alert']}: labels {used_labels - allowed} exist on none of its metrics"
        for label in re.findall(r"\$labels\.(\w+)", yaml.safe_dump(rule["annotations"])):
            assert label in allowed, f"{rule['alert']}: annotation uses unknown label {label}"


def test_metrics_md_lists_what_the_code_registers() -> None:
    code = code_metrics()
    for metric, labels in documented().items():
        if metric == "ragmesh_runtime_requests_total":  # the runtime's own registry (test_metrics_exported.py)
            continue
        assert metric in code, f"METRICS.md lists {metric}, which no code registers"
        assert labels <= code[metric], f"METRICS.md names labels {labels - code[metric]} {metric} does not have"


def test_the_unit_tests_feed_series_the_code_exports() -> None:
    code = code_metrics()
    for case in load(ALERT_TESTS)["tests"]:
        for item in case["input_series"]:
            name, labels = re.fullmatch(r"(\w+)(?:\{(.*)\})?", item["series"]).groups()
            given = set(re.findall(r"(\w+)\s*=", labels or ""))
            if name == "up":
                assert given <= TARGET_LABELS, item["series"]
                continue
            metric = metric_of(name)
            assert metric in code, item["series"]
            expected = code[metric] | ({"le"} if name.endswith("_bucket") else set())
            # The series as a scrape gives them: all of the metric's labels, plus target labels.
            assert expected <= given <= expected | TARGET_LABELS, item["series"]


def test_prometheus_loads_the_rules_in_compose() -> None:
    config = load(OBSERVABILITY / "prometheus.yml")
    assert config["rule_files"] == [ALERTS.name]
    prometheus = load(ROOT / "deploy/compose.core.yml")["services"]["prometheus"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in prometheus["command"]
    assert f"./observability/{ALERTS.name}:/etc/prometheus/{ALERTS.name}:ro" in prometheus["volumes"]


def test_target_down_watches_every_ragmesh_scrape_job() -> None:
    from ragmesh_common.settings import METRICS_PORTS

    (expr,) = [rule["expr"] for rule in rules() if rule["alert"] == "RagmeshTargetDown"]
    watched = set(re.search(r'job=~"([^"]+)"', expr).group(1).split("|"))
    jobs = {job["job_name"] for job in load(OBSERVABILITY / "prometheus.yml")["scrape_configs"]}
    assert watched == {"gateway", "runtime", *METRICS_PORTS} and watched <= jobs


def test_each_runbook_is_a_section_of_the_operations_guide() -> None:
    guide = (ROOT / "docs/operations.md").read_text(encoding="utf-8")
    anchors = {re.sub(r"[^a-z0-9 -]", "", heading.lower()).replace(" ", "-")
               for heading in re.findall(r"^#+ (.+)$", guide, re.M)}
    for rule in rules():
        path, anchor = rule["annotations"]["runbook"].split("#")
        assert path == "docs/operations.md" and anchor in anchors, rule["alert"]
        assert anchor == rule["alert"].lower()
