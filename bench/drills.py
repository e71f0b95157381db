"""Fault drills under load, each part of the embedded mesh killed in turn: ``ragmesh_bench.drills``, where its
options and rows are described (tests/e2e/test_drills.py imports it from there)."""

from ragmesh_bench.drills import main

if __name__ == "__main__":
    raise SystemExit(main())
