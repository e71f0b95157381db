"""The test folders' name for :mod:`ragmesh_bench.loopback_server` (tests/ is on sys.path through
tests/conftest.py): one uvicorn-in-a-thread server for the tests and the bench scripts alike."""

from ragmesh_bench.loopback_server import read_body, serve, serve_in_thread

__all__ = ["read_body", "serve", "serve_in_thread"]
