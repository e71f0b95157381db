"""HTTP clients for the model runtimes: TEI (embeddings, rerank) and OpenAI-compatible chat."""
