"""Node 22 and the official MCP tools from tests/conformance/npm (``make conformance-tools``).

Installed once from the npm registry, pinned with hashes in package-lock.json; the tests then run
them offline. Missing tools skip the test with the command to run, and fail it under CI=true.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
NPM = ROOT / "tests" / "conformance" / "npm"
BIN = NPM / "node_modules" / ".bin"
INSTALL = "run `make conformance-tools` (npm ci of tests/conformance/npm; needs the npm registry once)"
NODE_MAJOR = 22


def _missing(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason} (CI=true, so this is a failure, not a skip)")
    pytest.skip(reason)


def node_env() -> dict[str, str]:
    """The environment for the npm tools: Node 22 from the npm registry first on PATH."""
    node = BIN / "node"
    if not node.exists():
        _missing(f"Node {NODE_MAJOR} from npm is not installed: {INSTALL}")
    version = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=30).stdout
    if not version.startswith(f"v{NODE_MAJOR}."):
        _missing(f"{node} is {version.strip() or 'not runnable'}, not Node {NODE_MAJOR}: {INSTALL}")
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "NO_COLOR": "1"}


def tool(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        _missing(f"{name} is not installed: {INSTALL}")
    return path
