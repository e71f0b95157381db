"""Bad input to the Compose stack fails fast and says what is wrong; nothing keeps restarting unseen.

Each case starts one service of a throwaway project (<project>-bad, `--no-deps`) with one thing
wrong: a secret file that is not there, a corpora folder that is not there, a port already taken,
a required variable left empty. `docker compose up` must fail within seconds, and its output or the
container's log must name the file, folder, port or variable.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from compose_stack import ComposeProject

pytestmark = pytest.mark.compose

FAST_S = 60


@pytest.fixture
def bad(project: ComposeProject) -> Iterator[ComposeProject]:
    throwaway = ComposeProject(f"{project.name}-bad", list(project.files))
    yield throwaway
    throwaway.run("--profile", "job", "down", "-v", "--remove-orphans", "--timeout", "5", check=False)


def up(project: ComposeProject, *services: str, env: dict[str, str] | None = None, wait: bool = False):
    started = time.monotonic()
    waiting = ["--wait", "--wait-timeout", str(FAST_S)] if wait else []
    result = project.run("up", "-d", "--no-deps", *waiting, *services, check=False, timeout=FAST_S * 3, env=env)
    return result, time.monotonic() - started


def test_a_missing_secret_file_stops_up_naming_the_file(bad: ComposeProject, tmp_path: Path) -> None:
    (tmp_path / "postgres_password").write_text("only this one\n")
    result, seconds = up(bad, "indexer", env={"RAGMESH_SECRETS_DIR": str(tmp_path)})
    assert result.returncode != 0 and seconds < FAST_S
    assert str(tmp_path / "ragmesh_postgres_url") in result.stderr, result.stderr
    assert not bad.run("ps", "-q").stdout.strip(), "a container runs without its secret"


def test_a_corpora_folder_that_is_not_there_stops_up_naming_the_folder(bad: ComposeProject, tmp_path: Path) -> None:
    missing = tmp_path / "corpora-not-mounted"
    result, seconds = up(bad, "indexer", env={"RAGMESH_CORPORA_DIR": str(missing)})
    assert result.returncode != 0 and seconds < FAST_S
    assert str(missing) in result.stderr and "does not exist" in result.stderr, result.stderr
    assert not missing.exists(), "Compose created the folder instead of refusing"


def test_a_port_already_taken_stops_up_naming_the_port(bad: ComposeProject) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result, seconds = up(bad, "nginx", env={"RAGMESH_HTTP_BIND": "127.0.0.1", "RAGMESH_HTTP_PORT": str(port)})
    assert result.returncode != 0 and seconds < FAST_S
    assert f"127.0.0.1:{port}" in result.stderr, result.stderr
    assert "already" in result.stderr or "in use" in result.stderr, result.stderr


def test_an_empty_required_variable_stops_the_service_naming_it(bad: ComposeProject, tmp_path: Path) -> None:
    # The indexer keeps its registry in PostgreSQL: without RAGMESH_POSTGRES_URL it must not start.
    override = tmp_path / "compose.no-postgres-url.yml"
    override.write_text("services:\n  indexer:\n    environment:\n      RAGMESH_POSTGRES_URL_FILE: ''\n")
    broken = ComposeProject(bad.name, [*bad.files, str(override)])
    result, seconds = up(broken, "indexer", wait=True)
    assert result.returncode != 0 and seconds < FAST_S, (seconds, result.stderr)
    assert "indexer" in result.stderr, result.stderr  # compose names the container that failed
    log = broken.logs("indexer")
    assert "RAGMESH_POSTGRES_URL" in log and "Traceback" not in log, log
    # Docker's restart policy knows no exit codes: it keeps retrying, with a delay that doubles up to
    # a minute, and shows it where an operator looks (`docker compose ps`: "Restarting (1)").
    (container,) = broken.container_ids("indexer")
    details = broken.inspect(container)
    assert details["RestartCount"] >= 1 or details["State"]["Status"] == "restarting", details["State"]


def test_make_compose_test_refuses_a_taken_port_before_building(tmp_path: Path) -> None:
    import subprocess

    from compose_stack import ROOT

    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        env = {**os.environ, "RAGMESH_HTTP_BIND": "127.0.0.1", "RAGMESH_HTTP_PORT": str(port),
               "RAGMESH_COMPOSE_CACHE": str(tmp_path)}
        started = time.monotonic()
        result = subprocess.run([str(ROOT / "deploy/compose-test/run")], cwd=ROOT, env=env,
                                capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode != 0 and time.monotonic() - started < 30
    assert f"RAGMESH_HTTP_PORT={port} is taken" in result.stderr, result.stderr
