"""HTTP edge of the runtime: TEI- and OpenAI-shaped routes, error bodies, metrics."""
