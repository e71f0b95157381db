"""ragmesh_generation."""
