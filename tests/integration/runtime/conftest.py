"""Fixtures for the runtime's integration tests: real models, loaded once per session."""

from __future__ import annotations

from typing import Iterator

import pytest
from litestar.testing import TestClient

from ragmesh_runtime.app import create_app
from ragmesh_runtime.models import LoadedModels, load_models
from ragmesh_runtime.settings import RuntimeSettings


@pytest.fixture(scope="session")
def runtime_models() -> LoadedModels:
    return load_models(RuntimeSettings())


@pytest.fixture
def client(runtime_models: LoadedModels) -> Iterator[TestClient]:
    with TestClient(app=create_app(RuntimeSettings(), runtime_models)) as test_client:
        yield test_client
