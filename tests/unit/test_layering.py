"""Layering is one-way: services -> libs -> generated protobuf.

No service imports another service; nothing in libs imports a service; the CLI starts services as
processes instead of importing them. The [tool.importlinter] contracts in pyproject.toml are the
source of truth (tests/unit/test_import_contracts.py runs them); this reader also sees what
import-linter does not: a module named in ``importlib.import_module("...")``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ["gateway", "retrieval", "rerank", "generation", "indexer"]
SERVICE_PACKAGES = {f"ragmesh_{s}" for s in SERVICES}


def imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value.split(".")[0])
    return names


def python_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


@pytest.mark.parametrize("service", SERVICES)
def test_service_imports_no_other_service(service: str) -> None:
    own = f"ragmesh_{service}"
    offenders = []
    for path in python_files(ROOT / "services" / service):
        bad = (imported_top_levels(path) & SERVICE_PACKAGES) - {own}
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, offenders


def test_libs_import_no_service() -> None:
    offenders = []
    for path in python_files(ROOT / "libs"):
        if "gen" in path.relative_to(ROOT / "libs").parts[:1]:
            continue
        bad = imported_top_levels(path) & SERVICE_PACKAGES
        if bad:
            offenders.append(f"{path.relative_to(ROOT)} imports {sorted(bad)}")
    assert not offenders, offenders


def test_checker_sees_a_violation(tmp_path: Path) -> None:
    """Guard against a checker that can never fail."""
    sample = tmp_path / "x.py"
    sample.write_text("import ragmesh_gateway.app\nfrom ragmesh_retrieval import servicer\n")
    assert imported_top_levels(sample) == {"ragmesh_gateway", "ragmesh_retrieval"}


def _edits_sys_path(path: Path) -> list[int]:
    """Lines of ``sys.path.insert/append/extend/...`` calls and ``sys.path = ...`` assignments."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

    def is_sys_path(node: ast.AST) -> bool:
        return (isinstance(node, ast.Attribute) and node.attr == "path"
                and isinstance(node.value, ast.Name) and node.value.id == "sys")

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and is_sys_path(node.func.value):
            lines.append(node.lineno)
        elif isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(is_sys_path(t) for t in targets):
                lines.append(node.lineno)
    return sorted(lines)


def test_no_bench_script_or_test_edits_sys_path() -> None:
    """bench/ and tests/ import the shared harness as an installed package (libs/ragmesh_bench)."""
    offenders = {str(p.relative_to(ROOT)): lines
                 for folder in ("bench", "tests", "libs", "services")
                 for p in python_files(ROOT / folder) if (lines := _edits_sys_path(p))}
    assert not offenders, offenders


def test_the_sys_path_reader_sees_an_edit(tmp_path: Path) -> None:
    script = tmp_path / "s.py"
    script.write_text("import sys\nsys.path.insert(0, 'bench')\nsys.path += ['x']\n", encoding="utf-8")
    assert _edits_sys_path(script) == [2, 3]
