"""The Compose project model the deployment tests check: files loaded, merged and interpolated the way
`docker compose -f a -f b` does it (Compose Specification, "Merge and override" and "Interpolation").

Shared by test_deploy_compose.py (the rules) and test_deploy_compose_loader.py (the real loader).
"""

from __future__ import annotations

import json
import re
from copy import deepcopy
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
SCHEMA = json.loads((ROOT / "tests/fixtures/compose-spec/compose-spec.json").read_text(encoding="utf-8"))
CORE, GPU, OPS, CI = (DEPLOY / f"compose.{name}.yml" for name in ("core", "gpu", "ops", "ci"))
RAGMESH_SERVICES = ("gateway", "retrieval", "rerank", "generation", "indexer", "runtime")
MODEL_SERVERS = ("vllm", "tei-embed", "tei-rerank")
# Services allowed to run without a health check, each for a reason written in the file itself.
ONE_SHOT_JOBS = ("index-job", "models-fetch")
# Values a test run uses for variables that must be set (`${VAR:?message}`).
REQUIRED_VARIABLES = {"RAGMESH_MODELS_DIR": "/srv/ragmesh/models"}


class Override:
    """A value tagged ``!override``: it replaces what the files before it set, instead of merging."""

    def __init__(self, value: Any) -> None:
        self.value = value


class Reset:
    """``!reset``: the attribute is removed, as if no file before had set it."""


class _ComposeLoader(yaml.SafeLoader):
    pass


def _construct_override(loader: yaml.SafeLoader, node: yaml.Node) -> Override:
    if isinstance(node, yaml.MappingNode):
        return Override(loader.construct_mapping(node, deep=True))
    if isinstance(node, yaml.SequenceNode):
        return Override(loader.construct_sequence(node, deep=True))
    return Override(loader.construct_scalar(node))


_ComposeLoader.add_constructor("!override", _construct_override)
_ComposeLoader.add_constructor("!reset", lambda loader, node: Reset())


def load(path: Path) -> dict[str, Any]:
    """One file as written; ``!override`` and ``!reset`` (Compose 2.24+) kept as markers for merge()."""
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_ComposeLoader)  # noqa: S506 - SafeLoader subclass


def plain(value: Any) -> Any:
    """``value`` without merge markers (what a single file means on its own)."""
    if isinstance(value, Override):
        return plain(value.value)
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items() if not isinstance(item, Reset)}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


# --- interpolation and merging, after the Compose Specification ---------------------------------------

_VARIABLE = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Resolve ${VAR}, ${VAR:-default}, ${VAR-default}, ${VAR:?error} and $$ in every string."""
    if isinstance(value, dict):
        return {key: interpolate(item, env) for key, item in value.items()}
    if isinstance(value, list):
        return [interpolate(item, env) for item in value]
    if not isinstance(value, str):
        return value

    def resolve(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name, op, arg = match.group("name"), match.group("op"), match.group("arg")
        current = env.get(name)
        if op in (":-", ":?") and not current:
            current = None
        if current is not None:
            return current
        if op and op.endswith("?"):
            raise KeyError(f"{name} must be set: {arg}")
        return arg or ""

    return _VARIABLE.sub(resolve, value)


def _unique_key(attribute: str, entry: Any) -> Any:
    if attribute == "volumes":
        # "${SOURCE:?message}:/target:ro" -> "/target"; a message may hold colons of its own.
        return (
            entry["target"] if isinstance(entry, dict) else re.sub(r"\$\{[^}]*\}", "x", entry).split(":")[1]
        )
    if attribute == "secrets":
        return entry.get("target", entry["source"]) if isinstance(entry, dict) else entry
    if attribute == "ports":
        if isinstance(entry, dict):
            return (entry.get("host_ip"), entry["target"], entry.get("published"), entry.get("protocol"))
        return entry
    return json.dumps(entry, sort_keys=True)


def merge(base: Any, override: Any, attribute: str = "") -> Any:
    """Merge two Compose trees: mappings deep-merge, sequences append, with the spec's exceptions."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            if isinstance(value, Reset):
                merged.pop(key, None)
            elif isinstance(value, Override):
                merged[key] = plain(value)
            elif key in ("command", "entrypoint") or (attribute == "healthcheck" and key == "test"):
                merged[key] = deepcopy(value)
            elif key in merged:
                merged[key] = merge(merged[key], value, key)
            else:
                merged[key] = deepcopy(value)
        return plain(merged)
    if isinstance(base, list) and isinstance(override, list):
        merged_list = {_unique_key(attribute, entry): entry for entry in base}
        for entry in override:
            merged_list[_unique_key(attribute, entry)] = entry
        return list(merged_list.values())
    return plain(deepcopy(override))


def project(*paths: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The interpolated model `docker compose -f p1 -f p2 ...` builds from these files."""
    tree: dict[str, Any] = {}
    for path in paths:
        tree = merge(tree, load(path))
    return interpolate(tree, {**REQUIRED_VARIABLES, **(env or {})})


def active_services(tree: dict[str, Any], profiles: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        name: service
        for name, service in tree["services"].items()
        if not service.get("profiles") or set(service["profiles"]) & set(profiles)
    }


COMBINATIONS = {
    "core": (CORE,),
    "core+gpu": (CORE, GPU),
    "core+ops": (CORE, OPS),
    "core+gpu+ops": (CORE, GPU, OPS),
    # make compose-test's project: core with what a host without an image registry cannot have.
    "core+ci": (CORE, CI),
}
