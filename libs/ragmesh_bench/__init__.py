"""What the benchmarks in bench/ and the tests share: a scratch PostgreSQL database, the mesh a smoke
pass measures, tiny data sets, and the ``--smoke`` option every bench script has (tests/README.md)."""
