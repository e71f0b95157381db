"""Every metric a dashboard or alert queries is exported by the process METRICS.md expects it from.

deploy/observability/METRICS.md lists what the dashboards and alert rules query
(test_deploy_observability.py and test_deploy_alerts.py hold them to that list). Here the observed
mesh (configured like compose.core.yml) answers one search and one chat, every process's /metrics
is scraped the way Prometheus scrapes it, and each listed metric must have samples (a labelled
counter that was never used exports only its HELP line, which gives a dashboard "No data") with the
labels the queries use.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ragmesh_cli.gateway_client import stream_answer

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
METRICS_MD = ROOT / "deploy/observability/METRICS.md"
PROCESSES = ("gateway", "runtime", "retrieval", "rerank", "generation", "indexer")
SUFFIXES = ("", "_total", "_bucket", "_count", "_sum")


def dashboard_metrics() -> dict[str, tuple[set[str], tuple[str, ...]]]:
    """metric -> (labels the queries use, processes expected to export it), from METRICS.md's tables
    of the mesh's metrics (the supervisor's, served by `ragmesh up` alone, are not the mesh's)."""
    text = METRICS_MD.read_text()
    sections = [re.search(rf"^## {heading}\n(.*?)(?=^## |\Z)", text, re.M | re.S).group(1)
                for heading in ("Dashboards", "Alerts and operations")]
    table = {}
    for name, labels, expected in re.findall(
        r"^\| `(ragmesh_[a-z0-9_]+)` \| [^|]+ \| ([^|]+) \| ([^|]+) \|$", "".join(sections), re.M
    ):
        used = set(re.findall(r"`([a-z_]+)`", labels.split("(")[0]))
        where = tuple(p.strip() for p in expected.split(","))
        table[name] = (used, PROCESSES if where == ("any service",) else where)
    return table


def scrape(url: str) -> dict[str, list]:
    """Samples by their family's documented name (counters as ``<name>_total``)."""
    text = httpx.get(url, timeout=10).text
    families: dict[str, list] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            base = sample.name
            for suffix in ("_bucket", "_count", "_sum", "_created"):
                if base.endswith(suffix) and base.removesuffix(suffix) == family.name:
                    base = family.name
            families.setdefault(base, []).append(sample)
    return families


def samples_of(exported: dict[str, list], metric: str) -> list:
    return [sample for suffix in SUFFIXES for sample in exported.get(metric.removesuffix("_total") + suffix, [])
            if not sample.name.endswith("_created")]


@pytest.fixture(scope="module")
def exported(observed_mesh) -> dict[str, dict[str, list]]:
    gateway = observed_mesh.gateway_url
    search = httpx.post(f"{gateway}/api/rag/v1/search", headers=observed_mesh.headers, timeout=60,
                        json={"query": "How long until pelican chicks fledge?", "top_k": 3,
                              "filters": {"library": "pelicans"}})
    assert search.status_code == 200, search.text
    answer = stream_answer(gateway, "What is the default queue depth of the Quokka scheduler?",
                           headers=observed_mesh.headers, timeout=120)
    assert answer["terminal"] and answer["terminal"]["event"] == "done", answer["terminal"]
    urls = observed_mesh.mesh.metrics_urls()
    assert set(urls) == set(PROCESSES), urls
    return {process: scrape(url) for process, url in urls.items()}


def test_metrics_md_lists_the_dashboard_metrics() -> None:
    # Guards against a table this module cannot read (which would make the next test vacuous).
    table = dashboard_metrics()
    assert len(table) >= 17 and "ragmesh_http_requests_total" in table
    assert table["ragmesh_index_build_duration_seconds"] == ({"corpus", "outcome"}, ("indexer",))
    assert table["ragmesh_grpc_server_requests_total"] == (
        {"service", "method", "code"}, ("retrieval", "rerank", "generation", "indexer"))


@pytest.mark.parametrize("metric", sorted(dashboard_metrics()))
def test_every_dashboard_metric_is_exported_with_the_labels_its_queries_use(exported, metric: str) -> None:
    labels, expected = dashboard_metrics()[metric]
    exporting = {process for process in expected if samples_of(exported[process], metric)}
    assert exporting, f"{metric} has no samples in {', '.join(expected)}"
    for process in exporting:
        for sample in samples_of(exported[process], metric):
            missing = labels - set(sample.labels)
            assert not missing, f"{process} exports {sample.name} without {sorted(missing)}"


def test_services_listed_one_by_one_each_export_the_metric(exported) -> None:
    for metric, (_, expected) in dashboard_metrics().items():
        if len(expected) > 1 and expected != PROCESSES:
            silent = [process for process in expected if not samples_of(exported[process], metric)]
            assert not silent, f"{metric}: METRICS.md expects it from {silent} too"


def test_the_samples_hold_what_the_panels_plot(exported) -> None:
    stages = {s.labels["stage"] for process in ("retrieval", "rerank")
              for s in samples_of(exported[process], "ragmesh_retrieval_stage_duration_seconds")}
    assert {"embed", "fusion", "rerank"} <= stages, stages
    active = {(s.labels["corpus"], s.value) for s in samples_of(exported["retrieval"], "ragmesh_active_index_info")}
    assert ("quokka@1.0", 1.0) in active and ("pelicans@1.0", 1.0) in active, active
    # The pelican notes hold one "ignore all previous instructions": the guard counts it.
    high = sum(s.value for s in samples_of(exported["gateway"], "ragmesh_injection_findings_total")
               if s.labels["severity"] == "high")
    assert high >= 1
    ttft = samples_of(exported["generation"], "ragmesh_generation_ttft_seconds")
    assert any(s.name.endswith("_count") and s.value >= 1 for s in ttft)
    statuses = {s.labels["status"] for s in samples_of(exported["gateway"], "ragmesh_http_requests_total")}
    assert all(re.fullmatch(r"\d{3}", status) for status in statuses), statuses
    codes = {s.labels["code"] for s in samples_of(exported["retrieval"], "ragmesh_grpc_server_requests_total")}
    assert "OK" in codes, codes


def test_the_indexer_reports_the_builds_and_promotions_the_mesh_made(exported) -> None:
    indexer = exported["indexer"]
    corpora = {"quokka@1.0", "pelicans@1.0"}
    built = {s.labels["corpus"] for s in samples_of(indexer, "ragmesh_index_build_duration_seconds")
             if s.name.endswith("_count") and s.labels["outcome"] == "built" and s.value == 1}
    assert corpora <= built, built
    embedded = {s.labels["corpus"]: s.value for s in samples_of(indexer, "ragmesh_index_chunks_embedded_total")}
    assert all(embedded.get(corpus, 0) > 0 for corpus in corpora), embedded
    failures = [s for s in samples_of(indexer, "ragmesh_index_gate_failures_total") if s.value]
    assert not failures, failures
    ages = {s.labels["corpus"]: s.value for s in samples_of(indexer, "ragmesh_index_active_version_age_seconds")}
    assert set(ages) == corpora and all(age >= 0 for age in ages.values()), ages
    checks = {s.labels["check"]: s.value for s in samples_of(exported["gateway"], "ragmesh_gateway_readiness_check")}
    assert checks == {"retrieval": 1, "rerank": 1, "generation": 1, "corpora": 1}, checks


def test_every_process_froze_its_startup_objects_and_times_its_collections(exported) -> None:
    for process in PROCESSES:
        frozen = [s.value for s in samples_of(exported[process], "ragmesh_gc_frozen_objects")]
        assert frozen and frozen[0] > 10_000, f"{process} froze {frozen}"
        timed = {s.labels["generation"]: s.value for s in samples_of(exported[process], "ragmesh_gc_pause_seconds")
                 if s.name.endswith("_count")}
        assert set(timed) == {"0", "1", "2"} and timed["0"] >= 1, f"{process}: collections timed {timed}"
