"""Compose against the code: what each ragmesh container is given is what its process reads.

The variables each process reads are collected from its code statically (code_env_model.py): the
module Compose runs and every ragmesh module it imports. Then, for the core project and the GPU
overlay:

- every variable a process *requires* (``required=True``, ``MissingSetting``) is set for it, directly
  or as ``<NAME>_FILE`` pointing at a secret mounted in that container;
- every variable Compose sets for a ragmesh container is read by code: a service's own variables
  by that service, the shared block (``x-ragmesh-env``) by at least one process (no dead config);
- the values parse: each service's settings load from exactly the Compose environment, and the
  gateway assembles with them;
- ports and health checks are the ones the code serves: listen and metrics ports from the loaded
  settings, Prometheus targets, the nginx upstream, HTTP health paths that are real routes, and the
  gRPC health command answering a real ragmesh gRPC server.

The Kubernetes base gets the same variable checks (ConfigMap, container env, mounted secrets) and
its HTTP probes the route check. Pinned images are checked in test_deploy_compose.py
(test_every_pulled_image_is_pinned).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from code_env_model import ENTRY_MODULES, all_reads, process_reads
from deploy_compose_model import CORE, DEPLOY, GPU, RAGMESH_SERVICES, load, project

PROCESSES = (*RAGMESH_SERVICES, "index-job")
PROJECTS = {"core": (CORE,), "core+gpu": (CORE, GPU)}


def environment(tree: dict[str, Any], service: str) -> dict[str, str]:
    return {key: str(value) for key, value in (tree["services"][service].get("environment") or {}).items()}


def shared_values() -> dict[str, set[str]]:
    """The blocks every ragmesh container gets (x-ragmesh-env; the GPU overlay's x-gpu-model-env),
    as written, before interpolation: name -> the values the blocks give it."""
    shared: dict[str, set[str]] = {}
    for block in (load(CORE)["x-ragmesh-env"], load(GPU)["x-gpu-model-env"]):
        for key, value in block.items():
            shared.setdefault(key, set()).add(str(value))
    return shared


def own_variables(paths: tuple[Path, ...], service: str) -> set[str]:
    """Variables a service sets for itself: not from a shared block, or overriding its value."""
    shared = shared_values()
    own = set()
    for path in paths:
        block = (load(path)["services"].get(service) or {}).get("environment") or {}
        own |= {key for key, value in block.items() if str(value) not in shared.get(key, set())}
    return own


def secret_files(tree: dict[str, Any], service: str) -> set[str]:
    mounted = tree["services"][service].get("secrets") or []
    return {f"/run/secrets/{entry if isinstance(entry, str) else entry.get('target', entry['source'])}"
            for entry in mounted}


# --- the collector itself --------------------------------------------------------------------------


def test_the_collector_finds_reads_it_must_find() -> None:
    # Guards against a collector that silently finds nothing: one read of each kind it handles.
    gateway, indexer = process_reads("gateway"), process_reads("indexer")
    assert "RAGMESH_AUTH_MODE" in gateway.names  # env_str in the service's settings
    assert "RAGMESH_RETRIEVAL_ADDR" in gateway.names  # addr("retrieval")
    assert "RAGMESH_OTLP_ENDPOINT" in gateway.names  # os.environ.get in ragmesh_common.telemetry
    assert "RAGMESH_POSTGRES_URL_FILE" in gateway.names  # env_str also reads NAME_FILE
    assert "RAGMESH_INDEXER_FAULT_AT" in indexer.names  # os.environ.get(MODULE_CONSTANT)
    assert "RAGMESH_POSTGRES_URL" in indexer.required  # env_str(..., required=True)
    assert "RAGMESH_REDIS_URL" in gateway.required  # MissingSetting(...) in a lazily built adapter
    assert "RAGMESH_RUNTIME_RERANK_METHOD" in process_reads("runtime").names
    assert "RAGMESH_AUTH_MODE" not in process_reads("rerank").names  # no leaks between services


# --- variables ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("paths", PROJECTS.values(), ids=PROJECTS.keys())
def test_every_required_variable_is_set_for_the_container_that_reads_it(paths: tuple[Path, ...]) -> None:
    tree = project(*paths)
    for service in PROCESSES:
        given = environment(tree, service)
        mounted = secret_files(tree, service)
        for name in sorted(process_reads(service).required):
            if given.get(name):
                continue
            file = given.get(f"{name}_FILE")
            assert file, f"{service} requires {name} (read in {sorted(process_reads(service).where[name])})"
            assert file in mounted, f"{service}: {name}_FILE={file} is not a secret mounted in the container"


@pytest.mark.parametrize("paths", PROJECTS.values(), ids=PROJECTS.keys())
def test_every_file_variable_names_a_mounted_secret(paths: tuple[Path, ...]) -> None:
    tree = project(*paths)
    for service in PROCESSES:
        mounted = secret_files(tree, service)
        for name, value in environment(tree, service).items():
            if name.endswith("_FILE"):
                assert value in mounted, f"{service}: {name}={value} is not mounted"


@pytest.mark.parametrize("paths", PROJECTS.values(), ids=PROJECTS.keys())
def test_no_dead_configuration(paths: tuple[Path, ...]) -> None:
    tree = project(*paths)
    read_anywhere = all_reads()
    for service in PROCESSES:
        read_here = process_reads(service).names
        own = own_variables(paths, service)
        for name in environment(tree, service):
            assert name.startswith("RAGMESH_"), f"{service} sets {name}, which no ragmesh code reads"
            if name in own:
                assert name in read_here, f"{service} sets {name}, but {ENTRY_MODULES[service]} never reads it"
            else:
                # A shared block goes to every container; some process must read each entry.
                assert name in read_anywhere, f"{name} is set for every service but read by none"


def test_the_shared_block_and_a_service_override_are_told_apart() -> None:
    # RAGMESH_RETRIEVAL_ADDR is shared (retrieval:50051) but retrieval listens on its own value.
    assert "RAGMESH_RETRIEVAL_ADDR" in own_variables((CORE,), "retrieval")
    assert "RAGMESH_RETRIEVAL_ADDR" not in own_variables((CORE,), "rerank")
    assert {"RAGMESH_AUTH_MODE", "RAGMESH_GATEWAY_HOST"} <= own_variables((CORE,), "gateway")
    assert not own_variables((CORE, GPU), "generation") - own_variables((CORE,), "generation")


# --- values parse -------------------------------------------------------------------------------------


@pytest.fixture
def compose_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """Set exactly one container's Compose environment (secrets as files under tmp_path)."""

    def apply(service: str, paths: tuple[Path, ...] = (CORE,)) -> dict[str, str]:
        tree = project(*paths)
        given = environment(tree, service)
        for name in [n for n in os.environ if n.startswith("RAGMESH_")]:
            monkeypatch.delenv(name)
        for name, value in given.items():
            if name.endswith("_FILE"):
                secret = tmp_path / Path(value).name
                secret.write_text("postgresql://ragmesh:secret@postgres:5432/ragmesh\n", encoding="utf-8")
                value = str(secret)
            monkeypatch.setenv(name, value)
        # The state folder is created on load; keep it out of the machine's /var/lib.
        monkeypatch.setenv("RAGMESH_STATE_DIR", str(tmp_path / "state"))
        return given

    return apply


def loaded_settings(service: str) -> Any:
    if service == "gateway":
        from ragmesh_gateway.settings import GatewaySettings

        return GatewaySettings.from_env()
    if service == "retrieval":
        from ragmesh_retrieval.settings import load_settings

        return load_settings()
    if service == "rerank":
        from ragmesh_rerank.settings import RerankSettings

        return RerankSettings.from_env()
    if service == "generation":
        from ragmesh_generation.settings import GenerationSettings

        return GenerationSettings.from_env()
    if service == "indexer":
        from ragmesh_indexer.settings import IndexerSettings

        return IndexerSettings.from_env()
    from ragmesh_runtime.settings import RuntimeSettings

    return RuntimeSettings.from_env()


# Every service each project runs: the GPU overlay runs no CPU runtime (it starts only with
# --profile cpu-runtime, which the next test checks), so that pair is not a case.
SERVICE_CASES = [pytest.param(service, paths, id=f"{service}-{name}")
                 for name, paths in PROJECTS.items() for service in RAGMESH_SERVICES
                 if not (service == "runtime" and paths == (CORE, GPU))]


def test_the_gpu_overlay_runs_the_cpu_runtime_only_on_request() -> None:
    assert load(GPU)["services"]["runtime"]["profiles"] == ["cpu-runtime"]
    assert "profiles" not in load(CORE)["services"]["runtime"]


@pytest.mark.parametrize(("service", "paths"), SERVICE_CASES)
def test_each_service_loads_its_settings_from_the_compose_environment(
    compose_env, service: str, paths: tuple[Path, ...]
) -> None:
    compose_env(service, paths)
    settings = loaded_settings(service)  # a bad value exits (SystemExit) naming its variable
    if service == "gateway":
        assert settings.auth_mode == "tokens" and settings.postgres_url.startswith("postgresql://")
        assert settings.allow_anonymous is True and settings.rate_limits
    if service == "retrieval":
        assert settings.store_kind == "qdrant-server"


def test_the_gateway_assembles_with_the_compose_environment(compose_env) -> None:
    from ragmesh_gateway.app import create_app
    from ragmesh_gateway.access.client_address import parse_networks
    from ragmesh_gateway.access.ratelimit import parse_limits
    from ragmesh_gateway.settings import GatewaySettings

    compose_env("gateway")
    settings = GatewaySettings.from_env()
    assert parse_limits(settings.rate_limits)  # raises on a malformed limit
    assert parse_networks(settings.trusted_proxies)
    app = create_app(settings)  # builds token auth and Redis rate limits; no I/O until start
    assert {"/health/live", "/health/ready", "/metrics"} <= {route.path for route in app.routes}


# --- ports and health checks --------------------------------------------------------------------------


def served_port(service: str) -> int:
    settings = loaded_settings(service)
    if service == "runtime":
        return settings.server.port
    if service == "indexer":
        return int(settings.listen.rsplit(":", 1)[1])
    return settings.port


def healthcheck_target(service: str) -> tuple[str, str]:
    test = project(CORE)["services"][service]["healthcheck"]["test"]
    assert test[1:4] == ["python", "-m", "ragmesh_common.healthcheck"], service
    return test[4], test[5]


@pytest.mark.parametrize("service", RAGMESH_SERVICES)
def test_health_checks_and_scrapes_use_the_ports_the_code_serves(compose_env, service: str) -> None:
    compose_env(service)
    port = served_port(service)
    kind, target = healthcheck_target(service)
    checked = urlsplit(target).port if kind == "http" else int(target.rsplit(":", 1)[1])
    assert checked == port, f"{service} health check probes {checked}, the code listens on {port}"
    scrape = scrape_ports()[service]
    if service in ("gateway", "runtime"):
        assert scrape == port, f"Prometheus scrapes {service} on {scrape}, it serves /metrics on {port}"
    else:
        metrics_port = loaded_settings(service).metrics_port
        assert scrape == metrics_port, f"Prometheus scrapes {service} on {scrape}, metrics listen on {metrics_port}"


def scrape_ports() -> dict[str, int]:
    config = load(DEPLOY / "observability/prometheus.yml")
    ports = {}
    for job in config["scrape_configs"]:
        for discovery in job.get("dns_sd_configs", []):
            for name in discovery["names"]:
                ports[name] = discovery["port"]
                assert job.get("metrics_path", "/metrics") == "/metrics", job["job_name"]
    return ports


def test_nginx_proxies_to_the_port_the_gateway_serves(compose_env) -> None:
    compose_env("gateway")
    upstream = project(CORE)["services"]["nginx"]["environment"]["GATEWAY_UPSTREAM"]
    assert upstream == f"gateway:{served_port('gateway')}"


def gateway_routes() -> set[str]:
    from ragmesh_gateway.app import create_app
    from ragmesh_gateway.settings import GatewaySettings

    return {route.path for route in create_app(GatewaySettings()).routes}


def runtime_routes() -> set[str]:
    # The runtime's own route list (create_app would load the models).
    from litestar import Litestar

    from ragmesh_runtime.http.metrics import metrics_endpoint
    from ragmesh_runtime.http.openai_routes import OpenAiController
    from ragmesh_runtime.http.tei_routes import TeiController

    app = Litestar(route_handlers=[TeiController, OpenAiController, metrics_endpoint], openapi_config=None)
    return {route.path for route in app.routes}


def test_http_health_paths_and_metrics_paths_are_real_routes() -> None:
    gateway, runtime = gateway_routes(), runtime_routes()
    assert urlsplit(healthcheck_target("gateway")[1]).path in gateway
    assert urlsplit(healthcheck_target("runtime")[1]).path in runtime
    assert "/metrics" in gateway and "/metrics" in runtime
    # The runtime module's route list is the one its app serves.
    app_source = (DEPLOY.parent / "libs/ragmesh_runtime/app.py").read_text(encoding="utf-8")
    assert "route_handlers=[TeiController, OpenAiController, metrics_endpoint]" in app_source
    # nginx forwards these gateway paths for an outer load balancer.
    template = (DEPLOY / "nginx/templates/ragmesh.conf.template").read_text(encoding="utf-8")
    (health,) = re.findall(r"location ~ \^/health/\(([a-z|]+)\)\$", template)
    assert {f"/health/{name}" for name in health.split("|")} <= gateway


def test_kubernetes_probes_use_real_routes() -> None:
    from test_deploy_k8s import of_kind

    routes = {"gateway": gateway_routes(), "runtime": runtime_routes()}
    for name, deployment in of_kind("Deployment").items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            check = container.get(probe) or {}
            if "httpGet" in check:
                assert check["httpGet"]["path"] in routes[name], f"{name} {probe}"


async def test_the_grpc_health_command_answers_for_a_ragmesh_grpc_server() -> None:
    from ragmesh_common.rpc.server import GrpcServer

    server = GrpcServer("contract", host="127.0.0.1", port=0, metrics_port=None)
    port = await server.start()
    try:
        command = [sys.executable, "-m", "ragmesh_common.healthcheck", "grpc", f"127.0.0.1:{port}"]
        done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
    finally:
        await server.server.stop(None)
    # And it fails when nothing serves there, so the check above can fail.
    stopped = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=60)
    assert stopped.returncode == 1 and "unhealthy" in stopped.stderr


def test_kubernetes_sets_only_variables_the_code_reads_and_every_required_one() -> None:
    from test_deploy_k8s import of_kind

    config = of_kind("ConfigMap")["ragmesh-env"]["data"]
    unread = sorted(set(config) - all_reads())
    assert not unread, f"the ConfigMap sets {unread}, which no process reads"
    for name, deployment in of_kind("Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        own = {variable["name"]: str(variable.get("value", "")) for variable in container.get("env", [])}
        reads = process_reads(name)
        dead = sorted(set(own) - reads.names)
        assert not dead, f"{name} sets {dead}, but {ENTRY_MODULES[name]} never reads them"
        given = {**config, **own}
        secrets = {v["name"]: {item["path"] for item in v["secret"].get("items", [])}
                   for v in pod.get("volumes", []) if "secret" in v}
        mounted = {f"{m['mountPath']}/{path}" for m in container.get("volumeMounts", []) if m["name"] in secrets
                   for path in secrets[m["name"]]}
        for required in sorted(reads.required):
            if given.get(required):
                continue
            file = given.get(f"{required}_FILE")
            assert file, f"{name} requires {required}"
            assert file in mounted, f"{name}: {required}_FILE={file} is not a mounted secret"
