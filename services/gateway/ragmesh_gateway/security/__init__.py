"""The untrusted-text guard: prompt-injection findings in retrieved text, and their neutralisation.

Pure domain code (no client libraries) apart from ``metrics`` (the findings counter). Access
control (tokens, grants, rate limits) lives in ``ragmesh_gateway.access``, the feedback store in
``ragmesh_gateway.feedback`` and the gateway's migrations in ``ragmesh_gateway.store``.
"""
