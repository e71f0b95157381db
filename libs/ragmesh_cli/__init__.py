"""ragmesh_cli."""
