"""HTTP clients for the model runtimes: TEI (embeddings, rerank) and OpenAI-compatible chat."""

# Both pools drop a connection idle this long: well below the keep-alive of the servers they talk to
# (uvicorn's, hence the CPU runtime's, is 5 s). httpx's default expiry is that same 5 s, so a
# connection idle for just under 5 s was reused while the runtime was closing it: ReadError, i.e.
# UNAVAILABLE with the runtime up, and an answer flagged ``embedding`` (or ``generation``) for nothing
# (4 of 216 reuses after 4.8-5.2 s idle at load 17; the generation fault drill's stray ``embedding``
# flag in CI).
KEEPALIVE_EXPIRY_S = 2.0

# A ragmesh header TEI ignores: the CPU runtime serves a request marked "bulk" after the interactive
# ones queued with it (ragmesh_runtime.batching), so an index build's batches do not hold up searches.
# Here, not in .tei, so that the runtime, which reads it, needs none of the client's libraries.
PRIORITY_HEADER = "X-Ragmesh-Priority"
