"""Contract of the Compose deployment: deploy/compose.core.yml, compose.gpu.yml and compose.ops.yml.

The files are validated against the Compose Specification schema (vendored in tests/fixtures, see its
README), alone and merged the way `docker compose -f a -f b` merges them, and then held to the
deployment rules: pinned images, a health check and a non-root user everywhere, nginx the only
published port, secrets only from files, every variable documented in docs/operations.md.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from deploy_compose_model import (
    CI,
    COMBINATIONS,
    CORE,
    DEPLOY,
    GPU,
    MODEL_SERVERS,
    ONE_SHOT_JOBS,
    OPS,
    RAGMESH_SERVICES,
    ROOT,
    active_services,
    interpolate,
    load,
    merge,
    plain,
    project,
)

SCHEMA = json.loads((ROOT / "tests/fixtures/compose-spec/compose-spec.json").read_text(encoding="utf-8"))


# --- schema -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [CORE, GPU, OPS, CI], ids=lambda p: p.name)
def test_each_file_is_valid_against_the_compose_schema(path: Path) -> None:
    errors = sorted(jsonschema.Draft201909Validator(SCHEMA).iter_errors(plain(load(path))), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)


@pytest.mark.parametrize("paths", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_merged_projects_are_valid_against_the_compose_schema(paths: tuple[Path, ...]) -> None:
    tree = project(*paths)
    errors = sorted(jsonschema.Draft201909Validator(SCHEMA).iter_errors(tree), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors)
    for name, service in tree["services"].items():
        # The schema leaves this to the loader: a service needs something to run.
        assert "image" in service or "build" in service, f"{name} has neither image nor build"


def test_the_schema_rejects_a_misspelled_key() -> None:
    # Guards against a vendored schema that accepts anything.
    broken = load(CORE)
    broken["services"]["gateway"]["healthchek"] = broken["services"]["gateway"].pop("healthcheck")
    assert list(jsonschema.Draft201909Validator(SCHEMA).iter_errors(broken))


def test_an_unset_required_variable_stops_the_gpu_project() -> None:
    with pytest.raises(KeyError, match="RAGMESH_MODELS_DIR"):
        interpolate(merge(load(CORE), load(GPU)), {})


# --- images, health, users, ports ---------------------------------------------------------------------

_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_FLOATING_TAGS = {"latest", "main", "master", "stable", "edge", "nightly"}


@pytest.mark.parametrize("paths", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_every_pulled_image_is_pinned(paths: tuple[Path, ...]) -> None:
    for name, service in project(*paths)["services"].items():
        image = service["image"]
        if "build" in service:
            assert image.startswith("ragmesh/"), f"{name} builds an image it names {image}"
            continue
        reference = _DIGEST.sub("", image)
        assert ":" in reference.rsplit("/", 1)[-1], f"{name}: {image} has no tag"
        tag = reference.rsplit(":", 1)[1]
        assert tag not in _FLOATING_TAGS and re.search(r"\d", tag), f"{name}: {image} floats"


def test_images_pinned_by_digest_carry_a_well_formed_digest() -> None:
    images = [s["image"] for s in project(CORE, GPU)["services"].values()]
    with_digest = [image for image in images if "@" in image]
    assert len(with_digest) >= 4
    assert all(_DIGEST.search(image) for image in with_digest), with_digest


@pytest.mark.parametrize("paths", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_every_service_has_a_health_check(paths: tuple[Path, ...]) -> None:
    for name, service in project(*paths)["services"].items():
        check = service.get("healthcheck")
        assert check, f"{name} has no healthcheck"
        if check.get("disable"):
            # Only one-shot jobs, and a scratch image that cannot run any check, may opt out, and
            # each says why.
            assert name in (*ONE_SHOT_JOBS, "otel-collector"), f"{name} disables its health check"
            assert service.get("x-healthcheck-exempt"), f"{name} does not say why it has no check"
            continue
        test = check["test"]
        assert isinstance(test, list) and test[0] in ("CMD", "CMD-SHELL") and len(test) > 1, name


def test_ragmesh_services_use_the_shared_healthcheck_module_on_their_own_port() -> None:
    from ragmesh_common.settings import DEFAULT_PORTS

    services = project(CORE)["services"]
    for name in RAGMESH_SERVICES:
        test = services[name]["healthcheck"]["test"]
        assert test[1:4] == ["python", "-m", "ragmesh_common.healthcheck"], name
        assert str(DEFAULT_PORTS[name]) in test[-1], f"{name} checks {test[-1]}"


@pytest.mark.parametrize("paths", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_every_service_runs_as_a_non_root_user(paths: tuple[Path, ...]) -> None:
    for name, service in project(*paths)["services"].items():
        user = str(service.get("user", ""))
        assert user, f"{name} does not name its user (images often default to root)"
        assert user.split(":")[0] not in ("root", "0"), f"{name} runs as {user}"
        assert "ALL" in service.get("cap_drop", []), f"{name} keeps Linux capabilities"
        assert "no-new-privileges:true" in service.get("security_opt", []), name


def test_ragmesh_services_run_read_only_as_uid_10001() -> None:
    services = project(CORE)["services"]
    for name in (*RAGMESH_SERVICES, "index-job", "nginx"):
        assert services[name]["read_only"] is True, name
    for name in (*RAGMESH_SERVICES, "index-job"):
        assert services[name]["user"] == "10001:10001", name


@pytest.mark.parametrize("paths", [(CORE,), (CORE, GPU), (CORE, CI)], ids=["core", "core+gpu", "core+ci"])
def test_only_nginx_publishes_a_port(paths: tuple[Path, ...]) -> None:
    tree = project(*paths)
    publishing = {name for name, service in tree["services"].items() if service.get("ports")}
    assert publishing == {"nginx"}
    for name, service in tree["services"].items():
        networks = service.get("networks", [])
        if name == "nginx":
            assert set(networks) == {"edge", "backend"}
        elif name == "models-fetch":
            assert networks == ["egress"]
        else:
            assert networks == ["backend"], f"{name} joins {networks}"
    assert tree["networks"]["backend"]["internal"] is True


def test_the_ops_overlay_publishes_operator_uis_on_loopback_only() -> None:
    tree = project(CORE, OPS)
    for name, service in tree["services"].items():
        for port in service.get("ports", []):
            if name != "nginx":
                assert port["host_ip"] == "127.0.0.1", f"{name} publishes {port}"
    assert {n for n, s in tree["services"].items() if s.get("ports")} == {"nginx", "grafana", "prometheus"}


def test_nginx_port_and_bind_address_follow_their_variables() -> None:
    nginx = project(CORE, env={"RAGMESH_HTTP_PORT": "443", "RAGMESH_HTTP_BIND": "10.1.2.3"})["services"][
        "nginx"
    ]
    assert nginx["ports"] == [{"target": 8080, "published": "443", "host_ip": "10.1.2.3", "protocol": "tcp"}]


# --- structure ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("paths", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_dependencies_exist_and_are_waited_for_by_health(paths: tuple[Path, ...]) -> None:
    services = project(*paths)["services"]
    for name, service in services.items():
        for dependency, rule in service.get("depends_on", {}).items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            # A dependency in a profile its dependent is not in would not start with it.
            assert set(services[dependency].get("profiles", [])) <= set(service.get("profiles", [])), (
                f"{name} depends on {dependency}, which starts only with profile {services[dependency]['profiles']}")
            assert rule["condition"] == "service_healthy", f"{name} -> {dependency}"
            assert not services[dependency]["healthcheck"].get("disable"), f"{dependency} has no check"


def mounts(service: dict) -> list[dict]:
    """A service's volumes in the long syntax: {type, source, target, read_only[, bind]}."""
    found = []
    for volume in service.get("volumes", []):
        if isinstance(volume, dict):
            found.append(volume)
            continue
        source, target, *options = volume.split(":")
        kind = "bind" if source.startswith(("/", ".")) else "volume"
        found.append({"type": kind, "source": source, "target": target, "read_only": options == ["ro"]})
    return found


def test_every_service_has_resource_limits_and_named_volumes() -> None:
    tree = project(CORE, GPU)
    for name, service in tree["services"].items():
        limits = service["deploy"]["resources"]["limits"]
        assert limits.get("cpus") and limits.get("memory"), name
        for mount in mounts(service):
            if mount["type"] == "bind":
                # Bind mounts: read-only config, the corpus, and the model folder.
                assert mount["read_only"] or name == "models-fetch", f"{name} writes to {mount}"
            else:
                assert mount["source"] in tree["volumes"], f"{name} uses undeclared volume {mount['source']}"


def test_a_corpora_folder_that_is_not_there_is_refused_not_created() -> None:
    # Short-syntax binds make a missing host folder (empty, owned by root); the long syntax with
    # create_host_path false makes `up` fail with the path instead.
    for name, service in project(CORE)["services"].items():
        for mount in mounts(service):
            if mount["target"] == "/corpora":
                assert mount["type"] == "bind" and mount["read_only"] is True, name
                assert mount["bind"] == {"create_host_path": False}, name


@pytest.mark.parametrize("paths", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_every_tmpfs_belongs_to_the_user_the_service_runs_as(paths: tuple[Path, ...]) -> None:
    # The engine mounts a tmpfs owned by root unless told otherwise; a service running as another
    # user then cannot write there (retrieval's embedded store died with PermissionError).
    for name, service in project(*paths)["services"].items():
        uid, _, gid = str(service.get("user", "")).partition(":")
        for entry in service.get("tmpfs", []):
            path, _, options = entry.partition(":")
            given = dict(option.split("=", 1) for option in options.split(",") if "=" in option)
            assert uid.isdigit() and gid.isdigit(), f"{name} mounts tmpfs {path} but names its user {uid!r}"
            assert given.get("uid") == uid and given.get("gid") == gid, f"{name}: tmpfs {path} is not {uid}:{gid}"
            assert re.fullmatch(r"0?[0-7]{3,4}", given.get("mode", "")), f"{name}: tmpfs {path} has no mode"


@pytest.mark.parametrize("paths", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_health_checks_survive_a_busy_host_without_hiding_a_dead_service(paths: tuple[Path, ...]) -> None:
    # A Python check on 2 busy cores takes seconds: 3 s timeouts marked every container unhealthy.
    # A dead service must still show as unhealthy within a minute of its start period.
    def seconds(value: str) -> float:
        return float(value.removesuffix("s")) if value.endswith("s") and value[-2].isdigit() else float(value)

    for name, service in project(*paths)["services"].items():
        check = service["healthcheck"]
        if check.get("disable"):
            continue
        assert seconds(check["timeout"]) >= 10, f"{name}: timeout {check['timeout']}"
        assert seconds(check["interval"]) * check["retries"] <= 60, f"{name} may be dead unnoticed for longer"
        limit = 600 if name in MODEL_SERVERS else 120  # loading a 7B model takes minutes
        assert seconds(check["start_period"]) <= limit, f"{name}: start period {check['start_period']}"


def test_gateway_runs_two_replicas_behind_nginx() -> None:
    services = project(CORE)["services"]
    assert services["gateway"]["deploy"]["replicas"] == 2
    assert "container_name" not in services["gateway"]  # would stop --scale gateway=N
    environment = services["nginx"]["environment"]
    assert environment["GATEWAY_UPSTREAM"] == "gateway:8080"
    assert environment["GATEWAY_UPSTREAM_OPTIONS"] == "resolve"


def test_the_index_job_is_a_one_shot_client_of_the_indexer_in_the_job_profile() -> None:
    services = project(CORE)["services"]
    job = services["index-job"]
    assert job["profiles"] == ["job"] and job["restart"] == "no"
    assert job["entrypoint"] == ["ragmesh", "index", "ci"]
    assert job["command"][0] == "--corpus" and job["command"][1].startswith("/corpora/")
    assert job["depends_on"] == {"indexer": {"condition": "service_healthy"}}
    assert job["environment"]["RAGMESH_INDEXER_ADDR"] == "indexer:50054"
    # The indexer reads the folder the job names, so both see the corpora at the same path.
    (corpora,) = [v for v in mounts(job) if v["target"] == "/corpora"]
    assert corpora in mounts(services["indexer"]) and corpora in mounts(services["gateway"])
    assert "index-job" not in active_services(project(CORE))
    assert "index-job" in active_services(project(CORE), ("job",))


def test_each_service_listens_on_all_interfaces_and_is_reached_by_name() -> None:
    from ragmesh_common.settings import DEFAULT_PORTS

    services = project(CORE, GPU)["services"]
    listen_variables = {
        **{name: f"RAGMESH_{name.upper()}_ADDR" for name in ("retrieval", "rerank", "generation", "indexer")},
        "gateway": "RAGMESH_GATEWAY_HOST",
        "runtime": "RAGMESH_RUNTIME_HOST",
    }
    dockerfile = (DEPLOY / "Dockerfile").read_text(encoding="utf-8")
    for name, variable in listen_variables.items():
        own = services[name]["environment"][variable]
        expected = "0.0.0.0" if variable.endswith("_HOST") else f"0.0.0.0:{DEFAULT_PORTS[name]}"
        assert own == expected, f"{name} listens on {own}"
        assert f"ENV {variable}={expected}" in dockerfile, f"the {name} image does not listen on {expected}"
        for other, service in services.items():
            value = (service.get("environment") or {}).get(variable)
            if other != name and variable.endswith("_ADDR") and value is not None:
                assert value == f"{name}:{DEFAULT_PORTS[name]}", f"{other} reaches {name} at {value}"


def test_the_gpu_overlay_swaps_the_cpu_runtime_for_vllm_and_tei() -> None:
    cpu, gpu = project(CORE), project(CORE, GPU)
    assert "runtime" in active_services(cpu) and "runtime" not in active_services(gpu)
    assert set(MODEL_SERVERS) <= set(active_services(gpu))
    for name in ("gateway", "retrieval", "rerank", "generation", "indexer"):
        environment = gpu["services"][name]["environment"]
        assert environment["RAGMESH_EMBED_URL"] == "http://tei-embed:8080", name
        assert environment["RAGMESH_RERANK_URL"] == "http://tei-rerank:8080", name
        assert environment["RAGMESH_LLM_URL"] == "http://vllm:8000/v1", name
        assert environment["RAGMESH_LLM_MODEL"] == "Qwen/Qwen2.5-7B-Instruct", name
        # Everything else the core file sets survives the merge.
        assert environment["RAGMESH_QDRANT_URL"] == "http://qdrant:6333", name
    for name in MODEL_SERVERS:
        devices = gpu["services"][name]["deploy"]["resources"]["reservations"]["devices"]
        assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}], name
        assert gpu["services"][name]["environment"]["HF_HUB_OFFLINE"] == "1", name


def test_every_served_model_is_pinned_and_fetched_at_the_same_commit() -> None:
    gpu = project(CORE, GPU)["services"]
    fetched = dict(spec.split("@") for spec in gpu["models-fetch"]["command"][3:])
    assert len(fetched) == 3 and all(re.fullmatch(r"[0-9a-f]{40}", rev) for rev in fetched.values())
    served = {}
    for name in MODEL_SERVERS:
        paths = [arg for arg in gpu[name]["command"] if arg.startswith("/models/")]
        assert len(paths) == 1, f"{name} serves {paths}"
        snapshot = r"/models/models--(?P<org>[^/]+?)--(?P<repo>[^/]+)/snapshots/(?P<rev>[0-9a-f]{40})"
        match = re.fullmatch(snapshot, paths[0])
        assert match, f"{name} serves {paths[0]}, not a pinned snapshot"
        served[f"{match['org']}/{match['repo']}"] = match["rev"]
    assert served == fetched
    assert (
        gpu["vllm"]["command"][gpu["vllm"]["command"].index("--served-model-name") + 1]
        == (gpu["generation"]["environment"]["RAGMESH_LLM_MODEL"])
    )


def test_build_targets_exist_in_the_dockerfile() -> None:
    targets = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", (DEPLOY / "Dockerfile").read_text(), re.M | re.I))
    for name, service in project(CORE, GPU)["services"].items():
        if "build" in service:
            assert service["build"]["target"] in targets, name
            assert (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"]).is_file()


# --- secrets and configuration ------------------------------------------------------------------------


def test_secrets_come_from_files_never_from_the_compose_file() -> None:
    tree = project(CORE, GPU)
    for name, service in tree["services"].items():
        for key, value in (service.get("environment") or {}).items():
            assert not re.search(r"://[^/@\s]+@", str(value or "")), f"{name}.{key} embeds credentials"
            if re.search(r"PASSWORD|SECRET|API_KEY|TOKEN", key):
                assert key.endswith("FILE"), f"{name}.{key} holds a secret inline instead of a file path"
    for secret in tree["secrets"].values():
        assert secret["file"].startswith("./secrets/")
    elsewhere = project(CORE, env={"RAGMESH_SECRETS_DIR": "/etc/ragmesh/secrets"})
    assert {s["file"] for s in elsewhere["secrets"].values()} == {
        f"/etc/ragmesh/secrets/{name}" for name in tree["secrets"]
    }
    rules = [
        line for line in (DEPLOY / "secrets/.gitignore").read_text().splitlines() if not line.startswith("#")
    ]
    assert rules == ["*", "!.gitignore"]


def test_every_variable_is_documented_in_operations_md() -> None:
    operations = (ROOT / "docs/operations.md").read_text(encoding="utf-8")
    documented = set(re.findall(r"^\|\s*`([A-Z][A-Z0-9_]*)`", operations, re.M))
    used: set[str] = set()
    for path in (CORE, GPU, OPS):
        text = path.read_text(encoding="utf-8")
        used |= set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", text))
    for service in project(CORE, GPU, OPS)["services"].values():
        used |= set(service.get("environment") or {})
    k8s_config = load(DEPLOY / "k8s/base/config.yaml")
    used |= set(k8s_config["data"])
    missing = sorted(used - documented)
    assert not missing, f"add these to the variable table in docs/operations.md: {missing}"
    # And nothing stale: a documented variable is used by the files or by an example in the doc.
    examples = "".join(re.findall(r"```(?:yaml|bash)\n(.*?)```", operations, re.S))
    stale = sorted(name for name in documented - used if name not in examples)
    assert not stale, f"documented in docs/operations.md but used nowhere: {stale}"
