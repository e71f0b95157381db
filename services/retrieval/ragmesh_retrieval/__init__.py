"""ragmesh_retrieval."""
