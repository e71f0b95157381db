"""Gateway integration fixtures: gRPC doubles of the downstream services, and a test client."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from litestar.testing import AsyncTestClient

from gateway_mesh import Mesh, running_mesh
from ragmesh_gateway.app import create_app


@pytest.fixture
def mesh() -> Iterator[Mesh]:
    with running_mesh() as running:
        yield running


@pytest.fixture
async def client(mesh: Mesh) -> AsyncIterator[AsyncTestClient]:
    async with AsyncTestClient(create_app(mesh.settings())) as test_client:
        yield test_client
