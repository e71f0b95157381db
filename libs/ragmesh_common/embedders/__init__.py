"""Which embedding model made a vector, and which embedders may share an index (docs/runtime.md)."""
