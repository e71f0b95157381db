"""ragmesh_indexer."""
