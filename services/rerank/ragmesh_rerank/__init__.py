"""ragmesh_rerank."""
