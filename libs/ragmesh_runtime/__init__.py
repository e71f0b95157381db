"""ragmesh_runtime."""
