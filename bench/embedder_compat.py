"""May two embedders share an index? ``ragmesh_bench.embedder_compat``, where its options and output are
described (the tests import it from there)."""

from ragmesh_bench.embedder_compat import main

if __name__ == "__main__":
    raise SystemExit(main())
