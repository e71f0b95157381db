"""Session ids and owner keys: unguessable ids issued by the server, callers reduced to a hash."""

from __future__ import annotations

import hashlib
import secrets

SESSION_PREFIX = "rms_"
# 24 random bytes = 192 bits, 32 URL-safe characters; the prefix keeps ids recognisable in a
# support ticket and makes them start with a letter (the session_id pattern requires one).
SESSION_BYTES = 24


def new_session_id() -> str:
    return SESSION_PREFIX + secrets.token_urlsafe(SESSION_BYTES)


def storage_key(session_id: str) -> str:
    """What the store is keyed by: a digest, so a dump of Redis holds no usable session id."""
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()[:32]


def owner_key(principal: str) -> str:
    """The caller a session belongs to (a token's client id, "anonymous", "local"), as a digest."""
    return hashlib.sha256(f"ragmesh-session-owner:{principal}".encode()).hexdigest()[:32]
