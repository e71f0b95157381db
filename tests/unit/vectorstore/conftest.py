"""Fixtures of the vector-store tests (defined in vectorstore_fixtures.py, importable by the tests)."""

from vectorstore_fixtures import persistent, store  # noqa: F401 - pytest fixtures
