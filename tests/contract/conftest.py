"""Fixtures for the contract tests: the system programs some of them run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def promtool(pytestconfig: pytest.Config) -> str:
    found = shutil.which("promtool")
    if not found:
        # tests/conftest.py as pytest loaded it (several conftest modules share the name).
        root_conftest = pytestconfig.pluginmanager.getplugin(str(ROOT / "tests" / "conftest.py"))
        root_conftest.skip_or_fail("promtool is not installed (apt-get install -y prometheus)")
    return found
