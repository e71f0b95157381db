"""Fixtures of the retrieval unit tests (defined in retrieval_fixtures.py, importable by the tests)."""

from retrieval_fixtures import make_mesh, mesh  # noqa: F401 - pytest fixtures
