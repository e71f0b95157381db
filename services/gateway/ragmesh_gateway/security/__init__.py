"""The gateway's security layer: untrusted-text guard, rate limits, tokens, corpus ACL, feedback.

Domain parts (no client libraries): findings, injection_guard, tokens, client_address and
``corpus_access.readable_from``. Adapters: ratelimit (Redis), token_store, corpus_access.AccessStore
and feedback_store (PostgreSQL schema ``gateway``, migrations in ``ragmesh_gateway/store/migrations``).
Import from the submodules; this package deliberately re-exports nothing so that importing the
guard never pulls in a database driver.
"""
