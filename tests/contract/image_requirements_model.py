"""What each ragmesh image must carry, found from its code, and what its lock file gives it.

Each Python image installs ``deploy/requirements/<image>.lock`` (compiled by ``make lock`` from
``<image>.in``, constrained to ``requirements.lock``). The ``.in`` file names, on its
``# entry-modules:`` line, the modules its containers run: the service's ``python -m`` module, the
health check, and the commands operators exec in it (``ragmesh token``, ``ragmesh index ...``).

From those modules this collects every ragmesh module they import (code_env_model's closure, lazy
imports included) and every third-party module those import, and maps each one to the
distribution that installs it (read from the installed distributions' RECORD files). The image's
lock must hold each of those distributions, and nothing that no import or requirement of one pulls
in: an image carries what its processes import, and no more.

Shared by tests/contract/test_image_requirements.py and tests/contract/test_deploy_dockerfile.py.
"""

from __future__ import annotations

import ast
import functools
import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from code_env_model import ROOT, _parse, import_closure
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REQUIREMENTS = ROOT / "deploy/requirements"
PYTHON_IMAGES = ("gateway", "retrieval", "rerank", "generation", "indexer", "runtime")
# Modules ragmesh generates from proto/ (libs/gen, never committed) import these; the closure does
# not read generated code, so every image that speaks gRPC lists them itself.
GENERATED_CODE_IMPORTS = frozenset({"grpcio", "protobuf"})
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", re.M)


@dataclass(frozen=True)
class ImageRequirements:
    image: str
    entry_modules: tuple[str, ...]
    direct: frozenset[str]  # canonical names listed in <image>.in
    pins: dict[str, str]  # canonical name -> version, from <image>.lock


def canonical(name: str) -> str:
    return canonicalize_name(name)


def lock_pins(path: Path) -> dict[str, str]:
    return {canonical(name): version for name, version in _PIN.findall(path.read_text(encoding="utf-8"))}


def lock_hashes(path: Path) -> dict[str, frozenset[str]]:
    """canonical name -> the sha256 hashes the lock accepts for it."""
    text = re.sub(r"\\\n\s*", " ", path.read_text(encoding="utf-8"))
    hashes = {}
    for line in text.splitlines():
        match = _PIN.match(line)
        if match:
            hashes[canonical(match.group(1))] = frozenset(re.findall(r"--hash=sha256:([0-9a-f]{64})", line))
    return hashes


@functools.cache
def image_requirements(image: str) -> ImageRequirements:
    source = (REQUIREMENTS / f"{image}.in").read_text(encoding="utf-8")
    entry = re.search(r"^# entry-modules:(.*)$", source, re.M)
    assert entry, f"deploy/requirements/{image}.in has no '# entry-modules:' line"
    direct = frozenset(
        canonical(Requirement(line.split("#")[0].strip()).name)
        for line in source.splitlines()
        if line.split("#")[0].strip()
    )
    return ImageRequirements(
        image=image,
        entry_modules=tuple(entry.group(1).split()),
        direct=direct,
        pins=lock_pins(REQUIREMENTS / f"{image}.lock"),
    )


@functools.cache
def _module_owners() -> dict[str, str]:
    """Importable module name -> canonical name of the installed distribution that provides it."""
    owners: dict[str, str] = {}
    for dist in metadata.distributions():
        name = canonical(dist.metadata["Name"])
        for file in dist.files or ():
            parts = file.parts
            if not parts or parts[0].endswith((".dist-info", ".data")) or ".." in parts:
                continue
            if file.suffix == ".py" or file.suffix in (".so", ".pyd"):
                stem = parts[-1].split(".")[0]
                dotted = ".".join((*parts[:-1], stem) if stem != "__init__" else parts[:-1])
                if dotted:
                    owners.setdefault(dotted, name)
    return owners


def owner_of(module: str) -> str | None:
    """The distribution that installs ``module`` (its longest importable prefix), or None."""
    owners = _module_owners()
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        found = owners.get(".".join(parts[:end]))
        if found:
            return found
    return None


def third_party_imports(modules: frozenset[str]) -> dict[str, set[str]]:
    """Third-party module -> the ragmesh modules importing it (anywhere in their bodies)."""
    found: dict[str, set[str]] = {}
    for module in modules:
        for node in ast.walk(_parse(module)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                # `from pkg import name`: name may be a module (of a namespace package, even).
                names = [f"{node.module}.{alias.name}" for alias in node.names]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top.startswith("ragmesh") or top in sys.stdlib_module_names or top == "__future__":
                    continue
                found.setdefault(name, set()).add(module)
    return found


@functools.cache
def imported_distributions(image: str) -> dict[str, set[str]]:
    """Distributions the image's entry modules import -> the ragmesh modules importing them."""
    closure: frozenset[str] = frozenset().union(
        *(import_closure(entry) for entry in image_requirements(image).entry_modules)
    )
    needed: dict[str, set[str]] = {}
    for module, importers in third_party_imports(closure).items():
        owner = owner_of(module)
        assert owner, f"{sorted(importers)} import {module}, which no installed distribution provides"
        needed.setdefault(owner, set()).update(importers)
    return needed


def requirement_closure(roots: frozenset[str], root_extras: dict[str, set[str]] | None = None) -> set[str]:
    """``roots`` (with the ``root_extras`` asked of each) and everything their installed metadata
    requires, markers and extras honoured."""
    # The lock is for every CPython 3.11 (the images run 3.11.2 on Debian, 3.11.14 on python:slim): a
    # requirement counts when its marker holds for any of them.
    environments = [
        {**default_environment(), "python_version": "3.11", "python_full_version": patch}
        for patch in ("3.11.0", "3.11.99")
    ]
    seen: set[str] = set()
    todo: list[tuple[str, frozenset[str]]] = [
        (root, frozenset((root_extras or {}).get(root, ()))) for root in roots
    ]
    expanded: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, extras = todo.pop()
        if (name, extras) in expanded:
            continue
        expanded.add((name, extras))
        seen.add(name)
        for line in metadata.requires(name) or ():
            requirement = Requirement(line)
            if requirement.marker and not any(
                requirement.marker.evaluate({**environment, "extra": extra})
                for environment in environments
                for extra in (extras or {""})
            ):
                continue
            todo.append((canonical(requirement.name), frozenset(requirement.extras)))
    return seen
