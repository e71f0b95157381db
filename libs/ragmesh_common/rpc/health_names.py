"""Names in the gRPC health service that servers and their clients agree on.

Its own module, free of server imports, so that a client (the gateway) reads the names without
pulling in what only a server needs (grpcio-reflection is not in the gateway image).
"""

# The health service name under which a server reports one model dependency (``model:embedding``).
MODEL_HEALTH_PREFIX = "ragmesh.model."
