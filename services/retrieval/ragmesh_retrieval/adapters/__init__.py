"""Adapters of retrieval's own ports (the vector store's adapters live in ragmesh_common.vectorstore)."""
