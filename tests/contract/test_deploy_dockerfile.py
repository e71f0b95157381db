"""Contract of deploy/Dockerfile and /.dockerignore (read as text: no Docker daemon needed).

Pinned bases, one build stage feeding per-service targets, a non-root user, a health check per target
that matches the compose file, and a build context that can never carry secrets or local state.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "deploy/Dockerfile"
SERVICE_TARGETS = ("gateway", "retrieval", "rerank", "generation", "indexer", "runtime")


def stages() -> dict[str, list[str]]:
    """Stage name -> its instructions, continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", DOCKERFILE.read_text(encoding="utf-8"))
    result: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line, re.I)
        if match:
            current = match.group(2)
            result[current] = [line]
        elif current:
            result[current].append(line)
    return result


def instruction(stage: list[str], keyword: str) -> list[str]:
    return [line for line in stage if line.upper().startswith(keyword + " ")]


def test_base_images_are_pinned_by_digest() -> None:
    arguments = dict(re.findall(r"^ARG\s+(\w+_IMAGE)=(\S+)", DOCKERFILE.read_text(), re.M))
    assert set(arguments) == {"PYTHON_IMAGE", "NGINX_IMAGE"}
    for name, image in arguments.items():
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", image), f"{name}={image}"
    assert arguments["PYTHON_IMAGE"].startswith("python:3.11")
    for name, stage in stages().items():
        base = stage[0].split()[1]
        assert base.startswith("${") or base in stages(), f"stage {name} starts from unpinned {base}"


def test_every_service_has_a_target_built_on_the_shared_non_root_base() -> None:
    all_stages = stages()
    base = all_stages["service-base"]
    assert instruction(base, "USER") == ["USER 10001:10001"]
    assert any("useradd" in line and "--uid 10001" in line for line in base)
    for target in SERVICE_TARGETS:
        stage = all_stages[target]
        assert stage[0].split()[1] == "service-base", target
        assert instruction(stage, "CMD") == [f'CMD ["python", "-m", "ragmesh_{target}"]']
        assert not instruction(stage, "USER"), f"{target} changes user"


def test_each_target_health_check_matches_the_compose_file() -> None:
    compose = yaml.safe_load((ROOT / "deploy/compose.core.yml").read_text(encoding="utf-8"))
    all_stages = stages()
    for target in SERVICE_TARGETS:
        (healthcheck,) = instruction(all_stages[target], "HEALTHCHECK")
        exec_form = re.search(r"CMD\s+(\[.*\])", healthcheck).group(1)
        assert yaml.safe_load(exec_form) == compose["services"][target]["healthcheck"]["test"][1:], target


def test_each_image_installs_its_own_hash_checked_lock() -> None:
    all_stages = stages()
    build = all_stages["build"]
    assert any("--require-hashes" in line and "deploy/requirements/build.lock" in line for line in build)
    assert any("grpc_tools.protoc" in line for line in build), "stubs are not generated"
    assert "--generate-hashes" in (ROOT / "Makefile").read_text()
    installer = (ROOT / "deploy/requirements/install-venv").read_text(encoding="utf-8")
    assert 'pip sync --python /opt/venv/bin/python --require-hashes "$@" "deploy/requirements/$image.lock"' in installer
    for target in SERVICE_TARGETS:
        venv = all_stages[f"{target}-venv"]
        assert venv[0].split()[1] == "build", target
        assert instruction(venv, "RUN") == [f"RUN deploy/requirements/install-venv {target}"], target
        # The target gets its own environment, and nothing of the build stage but the code.
        copies = [line for line in instruction(all_stages[target], "COPY")]
        assert copies == [f"COPY --from={target}-venv /opt/venv /opt/venv"], (target, copies)
    assert instruction(all_stages["service-base"], "COPY") == ["COPY --from=build /app /app"]


def test_with_a_wheelhouse_no_build_step_reaches_a_network() -> None:
    # deploy/wheelhouse/ is in the build context (never the images); with wheels in it, pip and uv
    # read that folder alone. make compose-test builds with `network: none`, which proves it.
    rules = [line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line and line[0] != "#"]
    assert not any("deploy/wheelhouse".startswith(rule.rstrip("/")) for rule in rules)
    assert (ROOT / "deploy/wheelhouse/.gitignore").read_text().splitlines()[1:] == ["*", "!.gitignore"]
    build = stages()["build"]
    assert "COPY deploy/wheelhouse/ /wheelhouse/" in build
    assert any("--no-index --find-links /wheelhouse" in line for line in build)
    installer = (ROOT / "deploy/requirements/install-venv").read_text(encoding="utf-8")
    assert "set -- --offline --no-index --find-links /wheelhouse" in installer
    for target in (*SERVICE_TARGETS, "edge"):
        assert not any("/wheelhouse" in line for line in stages()[target]), f"{target} ships the wheelhouse"


def test_each_target_health_check_timing_matches_the_compose_file() -> None:
    compose = yaml.safe_load((ROOT / "deploy/compose.core.yml").read_text(encoding="utf-8"))
    for target in (*SERVICE_TARGETS, "edge"):
        (healthcheck,) = instruction(stages()[target], "HEALTHCHECK")
        given = dict(re.findall(r"--([a-z-]+)=(\S+)", healthcheck))
        service = compose["services"]["nginx" if target == "edge" else target]
        timing = {**compose.get("x-grpc-healthcheck-timing", {}), **service["healthcheck"]}
        assert given == {
            "interval": timing["interval"], "timeout": timing["timeout"],
            "start-period": timing["start_period"], "retries": str(timing["retries"]),
        }, target


def test_the_edge_image_runs_unprivileged_with_the_repository_nginx_config() -> None:
    edge = stages()["edge"]
    assert edge[0].split()[1] == "${NGINX_IMAGE}"
    assert instruction(edge, "USER")[-1] == "USER 101:101"
    copies = " ".join(instruction(edge, "COPY"))
    for path in (
        "deploy/nginx/nginx.conf",
        "deploy/nginx/snippets",
        "deploy/nginx/templates",
        "/widget-dist",
    ):
        assert path in copies
    (command,) = instruction(edge, "CMD")
    assert '"-p", "/tmp/"' in command
    from_render = re.findall(r'"([A-Z_]+)": "', (ROOT / "deploy/nginx/render_config.py").read_text())
    environment = " ".join(instruction(edge, "ENV"))
    for variable in from_render:
        assert f"{variable}=" in environment, f"the image does not set {variable}"


@pytest.mark.parametrize(
    "path",
    ["deploy/secrets", "deploy/corpora", ".venv", ".ragmesh-state", "libs/gen", "tests", "**/.git", "**/.env"],
)
def test_dockerignore_keeps_secrets_and_local_state_out(path: str) -> None:
    rules = [
        line.strip()
        for line in (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert path in rules or f"**/{path}" in rules
    assert not any(rule.startswith("!") for rule in rules), "a negation could bring an ignored path back"


def test_dockerignore_keeps_what_the_build_copies() -> None:
    rules = [
        line.strip() for line in (ROOT / ".dockerignore").read_text().splitlines() if line and line[0] != "#"
    ]
    copied = re.findall(r"^COPY\s+(?!--from)(.+?)\s+\S+$", DOCKERFILE.read_text(), re.M)
    sources = [source for line in copied for source in line.split()]
    assert "deploy/nginx/nginx.conf" in sources and "requirements.lock" in sources
    for source in sources:
        assert (ROOT / source).exists(), f"COPY {source}: missing in the repository"
        for rule in rules:
            assert not (source == rule or source.startswith(rule.rstrip("/") + "/")), f"{rule} hides {source}"
