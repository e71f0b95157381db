"""The layering is the [tool.importlinter] contracts in pyproject.toml, and `lint-imports` keeps them.

The first test runs lint-imports on the tree as it is. The others prove each kind of contract can
fail: they copy one package into a temporary folder, add a single back-edge to the copy, and run
lint-imports with the copy first on the path; each must name the contract it breaks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"
GATEWAY = ROOT / "services" / "gateway" / "ragmesh_gateway"


def lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = f"{pythonpath}{os.pathsep}{env['PYTHONPATH']}" if env.get("PYTHONPATH") else str(pythonpath)
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo"], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def contract_names() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    return [c["name"] for c in config["contracts"]]


def test_the_contracts_cover_the_mesh_and_the_gateway() -> None:
    names = contract_names()
    assert {"No service imports another service", "Gateway layers run one way",
            "Gateway features do not import each other", "Gateway controllers do not talk gRPC",
            "Gateway services and ports import no framework or client library"} <= set(names)
    assert any(name.startswith("Nothing in libs imports a service") for name in names)


def test_docs_show_the_contracts_as_they_are() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    contracts = pyproject[pyproject.index("[tool.importlinter]"):pyproject.index("\n[tool.pytest.ini_options]")]
    assert f"```toml\n{contracts.strip()}\n```" in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")


def test_lint_imports_keeps_every_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(contract_names())} kept, 0 broken." in result.stdout


@pytest.mark.parametrize(
    ("package", "module", "back_edge", "broken"),
    [
        # web/ sits below the features and must name none of them.
        (GATEWAY, "web/errors.py", "import ragmesh_gateway.search.service", "Gateway layers run one way"),
        # access control sits below web/.
        (GATEWAY, "access/ports.py", "import ragmesh_gateway.web.request_context", "Gateway layers run one way"),
        # Two features in the same layer.
        (GATEWAY, "files/service.py", "import ragmesh_gateway.search.service",
         "Gateway features do not import each other"),
        # The core (services, ports, models) names no framework, client library or protobuf.
        (GATEWAY, "search/service.py", "import litestar.response",
         "Gateway services and ports import no framework or client library"),
        (GATEWAY, "sessions/ports.py", "import ragmesh.v1.common_pb2",
         "Gateway services and ports import no framework or client library"),
        (GATEWAY, "corpora/controllers.py", "import grpc.aio", "Gateway controllers do not talk gRPC"),
        # A service importing another service.
        (GATEWAY, "search/service.py", "import ragmesh_retrieval.servicer", "No service imports another service"),
        # The CLI starts services as processes; it never imports one.
        (ROOT / "libs" / "ragmesh_cli", "main.py", "import ragmesh_gateway.app", "Nothing in libs imports a service"),
    ],
    ids=["web-names-a-feature", "access-imports-web", "feature-imports-feature", "core-imports-litestar",
         "core-imports-protobuf", "controller-imports-grpc", "service-imports-service", "cli-imports-a-service"],
)
def test_a_deliberate_back_edge_fails_lint_imports(
    tmp_path: Path, package: Path, module: str, back_edge: str, broken: str
) -> None:
    copy = tmp_path / "src" / package.name
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    target = copy / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{back_edge}  # deliberate back-edge\n",
                      encoding="utf-8")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")

    result = lint_imports(tmp_path, pythonpath=tmp_path / "src")

    assert result.returncode != 0, result.stdout
    assert f"{broken} BROKEN" in result.stdout, result.stdout
    importer = ".".join((package.name, *Path(module).with_suffix("").parts))
    assert f"{importer} -> " in result.stdout, result.stdout  # the report names the edge added
