"""Contract of deploy/compose.ci.yml, make compose-test's override for a host without an image registry.

It may change only what such a host cannot have, and must say why for each service it touches
(x-ci-substitutions). Everything else, the hardening above all, stays what compose.core.yml says:
a green make compose-test then speaks for the core file. The rules that hold for every project
(users, health checks, pinned images, ...) run on core+ci in test_deploy_compose.py as well.
"""

from __future__ import annotations

import re

from deploy_compose_model import CI, CORE, DEPLOY, RAGMESH_SERVICES, active_services, load, plain, project

UNAVAILABLE = {"qdrant", "otel-collector", "tempo", "grafana"}
REPLACED_IMAGES = {"postgres", "redis", "prometheus"}
# Per service, the attributes the override may set (and, for environment, which variables).
ALLOWED = {
    **{name: {"build", "environment"} for name in (*RAGMESH_SERVICES, "index-job")},
    "retrieval": {"build", "environment", "tmpfs", "volumes", "depends_on"},
    "indexer": {"build", "environment", "depends_on"},
    "nginx": {"build", "environment"},
    **{name: {"image"} for name in REPLACED_IMAGES},
    **{name: {"profiles"} for name in UNAVAILABLE},
}
ALLOWED_VARIABLES = {"RAGMESH_QDRANT_URL", "RAGMESH_OTLP_ENDPOINT", "GATEWAY_UPSTREAM_OPTIONS"}
KEPT = ("user", "read_only", "cap_drop", "security_opt", "restart", "healthcheck", "deploy", "networks",
        "secrets", "ports", "command", "entrypoint", "stop_grace_period", "logging")


def override() -> dict:
    return load(CI)


def test_every_service_the_override_touches_says_why() -> None:
    reasons = override()["x-ci-substitutions"]
    assert set(reasons) == set(override()["services"])
    for name, reason in reasons.items():
        assert isinstance(reason, str) and len(reason.split()) >= 5, f"{name}: {reason!r}"


def test_the_override_changes_only_what_this_host_cannot_have() -> None:
    for name, service in plain(override())["services"].items():
        assert set(service) <= ALLOWED[name], f"{name} changes {sorted(set(service) - ALLOWED[name])}"
        assert set(service.get("environment", {})) <= ALLOWED_VARIABLES, name
        if "build" in service:
            assert set(service["build"]) == {"network", "args"}, name
    for name in UNAVAILABLE:
        assert override()["services"][name]["profiles"] == ["needs-a-registry"], name


def test_hardening_and_everything_else_stay_as_the_core_file_says() -> None:
    core, ci = project(CORE), project(CORE, CI)
    assert set(core["services"]) == set(ci["services"])
    for name, service in core["services"].items():
        for key in KEPT:
            assert ci["services"][name].get(key) == service.get(key), f"{name}.{key} differs from compose.core.yml"
        if "build" in service:
            for key in ("context", "dockerfile", "target"):
                assert ci["services"][name]["build"][key] == service["build"][key], f"{name}.build.{key}"


def test_no_service_that_runs_needs_one_that_is_not_here() -> None:
    active = active_services(project(CORE, CI), ("job",))
    assert not UNAVAILABLE & set(active)
    for name, service in active.items():
        assert not UNAVAILABLE & set(service.get("depends_on", {})), name
        assert service.get("environment", {}).get("RAGMESH_OTLP_ENDPOINT", "") == "", name
    # Retrieval embeds the Qdrant engine in a volume of its own, and the indexer writes through it.
    retrieval = active["retrieval"]
    assert "retrieval-state:/var/lib/ragmesh" in retrieval["volumes"]
    assert retrieval["tmpfs"] == ["/tmp:uid=10001,gid=10001,mode=0700"]
    assert "retrieval-state" in project(CORE, CI)["volumes"]
    assert active["indexer"]["depends_on"]["retrieval"] == {"condition": "service_healthy"}
    for name in (*RAGMESH_SERVICES, "index-job"):
        assert active[name]["environment"]["RAGMESH_QDRANT_URL"] == "", name


def test_images_build_offline_on_the_debian_stand_ins() -> None:
    built = load(DEPLOY / "debian/images.yml")["services"]
    local_images = {service["image"] for service in built.values()}
    targets = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", (DEPLOY / "debian/Dockerfile").read_text(), re.M))
    for name, service in built.items():
        assert service["build"]["target"] in targets and service["build"]["network"] == "host", name
    ci = project(CORE, CI)["services"]
    for name, service in ci.items():
        if "build" in service:
            assert service["build"]["network"] == "none", name
            assert set(service["build"]["args"]) == {"PYTHON_IMAGE", "NGINX_IMAGE"}, name
            assert set(service["build"]["args"].values()) <= local_images, name
        elif name in REPLACED_IMAGES:
            assert service["image"] in local_images, name
