"""Inside the gateway: application services and ports never import a framework or a client library.

Only the edge (controllers, web/, mcp/) knows Litestar and the MCP SDK, only clients/ knows gRPC
and protobuf, and only the composition root and adapters know Redis and PostgreSQL drivers.

The import contracts "Gateway services and ports import no framework or client library" and
"Gateway controllers do not talk gRPC" in pyproject.toml are the source of truth; this reads the same
rule file by file, so that a failure names the file.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "services" / "gateway" / "ragmesh_gateway"
FRAMEWORKS = {
    "grpc",
    "grpc_health",
    "litestar",
    "mcp",
    "mcp_types",
    "uvicorn",
    "prometheus_client",
    "redis",
    "asyncpg",
    "httpx",
    "opentelemetry",
    "ragmesh",
}  # "ragmesh" = generated protobuf stubs
CORE = sorted(
    [PACKAGE / "access" / "ports.py", PACKAGE / "catalog.py", PACKAGE / "citations.py"]
    + [
        p
        for domain in ("search", "chat", "corpora", "files", "index_admin", "health", "feedback", "sessions")
        for p in (PACKAGE / domain).glob("*.py")
        if p.stem in {"service", "ports", "models"}
    ]
)


def top_level_imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_the_core_modules_were_found() -> None:
    assert len(CORE) >= 18 and all(p.is_file() for p in CORE)


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_application_services_and_ports_are_framework_free(path: Path) -> None:
    assert not top_level_imports(path) & FRAMEWORKS


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("controllers.py")), ids=lambda p: p.parent.name)
def test_controllers_do_not_talk_grpc(path: Path) -> None:
    assert not top_level_imports(path) & {"grpc", "ragmesh"}
