"""ragmesh_gateway."""
