"""Generate the Grafana dashboards under dashboards/ (dashboards as code).

    python deploy/observability/grafana/build_dashboards.py          # rewrite the JSON files
    python deploy/observability/grafana/build_dashboards.py --check  # exit 1 if they are stale

Queries use only the metrics listed in deploy/observability/METRICS.md; the contract tests check that
and that the committed JSON is what this script writes.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from dashboard_layout import RATE_WINDOW, DashboardBuilder, quantile, query_variable

DASHBOARD_DIR = Path(__file__).resolve().parent / "dashboards"


def service_health() -> dict[str, Any]:
    d = DashboardBuilder(
        "ragmesh-service-health",
        "ragmesh / service health",
        "Rate, errors and latency at the gateway and for every gRPC service; degradation and rate limits.",
    )
    http = "ragmesh_http_requests_total"
    d.row("Gateway (HTTP)")
    d.timeseries(
        "Requests per second by route",
        "Every HTTP request the gateway answered, by route template.",
        [(f"sum by (route) (rate({http}[{RATE_WINDOW}]))", "{{route}}")],
        "reqps",
    )
    d.timeseries(
        "Error ratio by route (5xx)",
        "Share of requests answered with a 5xx status. 4xx are the caller's errors and not counted.",
        [
            (
                f'sum by (route) (rate({http}{{status=~"5.."}}[{RATE_WINDOW}])) '
                f"/ sum by (route) (rate({http}[{RATE_WINDOW}]))",
                "{{route}}",
            )
        ],
        "percentunit",
    )
    d.timeseries(
        "Latency by route (p50 / p95)",
        "Time to the last byte. Streaming answers count their whole stream; see TTFT for the first token. "
        "Dots are exemplars: click one to open its trace.",
        [
            (quantile(0.5, "ragmesh_http_request_duration_seconds", "route"), "p50 {{route}}"),
            (quantile(0.95, "ragmesh_http_request_duration_seconds", "route"), "p95 {{route}}"),
        ],
        "s",
        exemplars=True,
    )
    d.timeseries(
        "Responses by status",
        "All routes together, stacked by HTTP status.",
        [(f"sum by (status) (rate({http}[{RATE_WINDOW}]))", "{{status}}")],
        "reqps",
        width=12,
        stacked=True,
    )
    d.timeseries(
        "Rate-limited requests by route class",
        "Requests the gateway refused with 429 (ragmesh_rate_limited_total); nginx's own flood guard is "
        "not in here.",
        [(f"sum by (route_class) (rate(ragmesh_rate_limited_total[{RATE_WINDOW}]))", "{{route_class}}")],
        "reqps",
        width=12,
    )

    grpc = "ragmesh_grpc_server_requests_total"
    sel = '{service=~"$service"}'
    d.row("gRPC services")
    d.timeseries(
        "Requests per second by service",
        "Calls each service answered.",
        [(f"sum by (service) (rate({grpc}{sel}[{RATE_WINDOW}]))", "{{service}}")],
        "reqps",
    )
    d.timeseries(
        "Error ratio by service",
        "Share of calls that ended with a status other than OK.",
        [
            (
                f'sum by (service) (rate({grpc}{{service=~"$service", code!="OK"}}[{RATE_WINDOW}])) '
                f"/ sum by (service) (rate({grpc}{sel}[{RATE_WINDOW}]))",
                "{{service}}",
            )
        ],
        "percentunit",
    )
    d.timeseries(
        "Latency p95 by service and method",
        "Server-side time per call. Dots are exemplars linking to traces.",
        [
            (
                quantile(0.95, "ragmesh_grpc_server_duration_seconds", "service, method", sel),
                "{{service}} {{method}}",
            )
        ],
        "s",
        exemplars=True,
    )
    d.timeseries(
        "Errors by service and code",
        "Non-OK calls per second, by gRPC status code.",
        [
            (
                f'sum by (service, code) (rate({grpc}{{service=~"$service", code!="OK"}}[{RATE_WINDOW}]))',
                "{{service}} {{code}}",
            )
        ],
        "reqps",
        width=12,
    )

    d.row("Degradation")
    d.timeseries(
        "Degraded answers by service and component",
        "Each time a service answered without one of its parts (for example no reranker, sparse-only "
        "retrieval). Non-zero means users get answers of lower quality.",
        [
            (
                f"sum by (service, component) (rate(ragmesh_degraded_total[{RATE_WINDOW}]))",
                "{{service}} / {{component}}",
            )
        ],
        "ops",
        width=12,
    )
    d.timeseries(
        "Degradation rate (per gateway request)",
        "Degradation events per HTTP request the gateway answered.",
        [
            (
                f"sum(rate(ragmesh_degraded_total[{RATE_WINDOW}])) / sum(rate({http}[{RATE_WINDOW}]))",
                "degraded / request",
            )
        ],
        "percentunit",
        width=12,
    )
    return d.build(
        [
            query_variable(
                "service", "gRPC service", "label_values(ragmesh_grpc_server_requests_total, service)"
            )
        ]
    )


def retrieval_and_answers() -> dict[str, Any]:
    d = DashboardBuilder(
        "ragmesh-retrieval-answers",
        "ragmesh / retrieval and answers",
        "Retrieval stages, time to first token, the active index, prompt-injection findings and feedback.",
    )
    stage = "ragmesh_retrieval_stage_duration_seconds"
    d.row("Retrieval")
    d.timeseries(
        "Stage latency p50 (dense, sparse, fusion, rerank)",
        "Median time of each retrieval stage.",
        [(quantile(0.5, stage, "stage"), "{{stage}}")],
        "s",
        width=12,
        exemplars=True,
    )
    d.timeseries(
        "Stage latency p95 (dense, sparse, fusion, rerank)",
        "Slow tail of each retrieval stage; rerank usually dominates.",
        [(quantile(0.95, stage, "stage"), "{{stage}}")],
        "s",
        width=12,
        exemplars=True,
    )
    d.timeseries(
        "Stage runs per second",
        "How often each stage runs; a stage that stops running while the others go on is degraded.",
        [(f"sum by (stage) (rate({stage}_count[{RATE_WINDOW}]))", "{{stage}}")],
        "ops",
        width=12,
    )
    d.table(
        "Active index version per corpus",
        "What each corpus answers from now (ragmesh_active_index_info). Changes with an index upgrade "
        "or a rollback.",
        "max by (corpus, index_version) (ragmesh_active_index_info)",
        ["corpus", "index_version"],
    )

    ttft = "ragmesh_generation_ttft_seconds"
    d.row("Answers")
    d.timeseries(
        "Time to first token (p50 / p95)",
        "From the generation request to its first streamed token.",
        [(quantile(0.5, ttft), "p50"), (quantile(0.95, ttft), "p95")],
        "s",
        width=12,
        exemplars=True,
    )
    d.stat(
        "TTFT p95 (last 5 minutes)",
        "The number to watch after a model or hardware change.",
        f"histogram_quantile(0.95, sum by (le) (rate({ttft}_bucket[5m])))",
        "s",
    )
    d.stat(
        "Answers generated per minute",
        "Generation requests that produced a first token.",
        f"sum(rate({ttft}_count[5m])) * 60",
        "none",
    )
    d.timeseries(
        "Model runtime requests by endpoint",
        "Calls to the CPU model runtime (embeddings, rerank, chat). Empty on the GPU profile.",
        [(f"sum by (endpoint) (rate(ragmesh_runtime_requests_total[{RATE_WINDOW}]))", "{{endpoint}}")],
        "reqps",
        width=12,
    )
    d.timeseries(
        "Feedback by rating",
        "Ratings users gave answers, per hour.",
        [("sum by (rating) (increase(ragmesh_feedback_total[1h]))", "{{rating}}")],
        "none",
        width=12,
        stacked=True,
    )

    d.row("Safety")
    d.timeseries(
        "Prompt-injection findings by rule and severity",
        "Retrieved passages flagged by the injection scanner, per hour.",
        [
            (
                "sum by (rule, severity) (increase(ragmesh_injection_findings_total[1h]))",
                "{{severity}} {{rule}}",
            )
        ],
        "none",
        width=12,
        stacked=True,
    )
    d.stat(
        "High-severity findings (24 h)",
        "Worth a look at the documents that triggered them.",
        'sum(increase(ragmesh_injection_findings_total{severity="high"}[24h]))',
        "none",
    )
    return d.build([])


DASHBOARDS = {
    "ragmesh-service-health.json": service_health,
    "ragmesh-retrieval-answers.json": retrieval_and_answers,
}


def render_all() -> dict[str, str]:
    return {name: json.dumps(build(), indent=2, sort_keys=True) + "\n" for name, build in DASHBOARDS.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description="Generate the ragmesh Grafana dashboards.")
    parser.add_argument("--check", action="store_true", help="exit 1 if the JSON files are stale")
    args = parser.parse_args()
    stale = []
    for name, text in render_all().items():
        path = DASHBOARD_DIR / name
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(name)
        else:
            path.write_text(text, encoding="utf-8")
    if stale:
        sys.exit(f"stale dashboards (run build_dashboards.py): {', '.join(stale)}")


if __name__ == "__main__":
    main()
