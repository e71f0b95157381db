"""ragmesh_common."""
