"""API tokens and scopes: the format, the hash, and who a token speaks for (pure domain code).

A token is ``rmk_<token_id>_<secret>``: ``token_id`` is 16 hex digits (public, used to find the
row, safe in logs and rate-limit keys), ``secret`` is 32 random bytes in URL-safe base64 (43
characters). Only ``sha256(secret)`` is stored, so a leaked table cannot be replayed; a plain
sha256 (no slow KDF) is enough because the secret has 256 bits of entropy, not a password's.
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import datetime
from collections.abc import Iterable

from ragmesh_common.errors import ErrorCode, RagmeshError

TOKEN_PREFIX = "rmk"
_TOKEN = re.compile(r"rmk_(?P<token_id>[0-9a-f]{16})_(?P<secret>[A-Za-z0-9_-]{43})")
_CLIENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}")
_MAX_BEARER_CHARS = 256  # far above a real token; anything longer is refused before any parsing


class Scope(enum.StrEnum):
    SEARCH = "rag:search"
    READ = "rag:read"
    ANSWER = "rag:answer"
    INDEX_BUILD = "rag:index:build"
    INDEX_PROMOTE = "rag:index:promote"
    ADMIN = "rag:admin"  # implies every other scope and reading every corpus


def parse_scopes(scopes: Iterable[str]) -> frozenset[Scope]:
    parsed: set[Scope] = set()
    for scope in scopes:
        try:
            parsed.add(Scope(scope))
        except ValueError:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"unknown scope {str(scope)[:40]!r}",
                               {"known_scopes": [s.value for s in Scope]}) from None
    return frozenset(parsed)


def check_client_id(client_id: str) -> str:
    if not isinstance(client_id, str) or not _CLIENT_ID.fullmatch(client_id):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT,
                           "client_id must be 1-128 characters of A-Z a-z 0-9 . _ : @ -, "
                           "starting with a letter or digit")
    return client_id


@dataclass(frozen=True, slots=True)
class Principal:
    """The authenticated caller: a client, the token it used, and what that token may do."""

    client_id: str
    scopes: frozenset[Scope]
    token_id: str

    @property
    def is_admin(self) -> bool:
        return Scope.ADMIN in self.scopes

    def has_scope(self, scope: Scope | str) -> bool:
        return self.is_admin or Scope(scope) in self.scopes

    def require(self, scope: Scope | str) -> None:
        if not self.has_scope(scope):
            raise RagmeshError(ErrorCode.PERMISSION_DENIED, f"token lacks scope {Scope(scope).value}")


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A stored token as listed to an operator: never the secret or its hash."""

    token_id: str
    client_id: str
    scopes: frozenset[Scope]
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None

    @property
    def active(self) -> bool:
        return self.revoked_at is None


@dataclass(frozen=True, slots=True)
class NewToken:
    token_id: str
    plaintext: str  # shown once; only its hash is stored
    secret_sha256: bytes


def mint_token() -> NewToken:
    token_id = secrets.token_hex(8)
    secret = secrets.token_urlsafe(32)
    return NewToken(token_id, f"{TOKEN_PREFIX}_{token_id}_{secret}", secret_hash(secret))


def secret_hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("ascii")).digest()


def unauthenticated() -> RagmeshError:
    # One message for every failure, so a caller cannot tell a wrong secret from a revoked token.
    return RagmeshError(ErrorCode.UNAUTHENTICATED, "missing, malformed, unknown or revoked token")


def split_bearer(bearer: object) -> tuple[str, str]:
    """``(token_id, secret)`` of ``rmk_...`` or ``Bearer rmk_...``; UNAUTHENTICATED otherwise."""
    if not isinstance(bearer, str) or len(bearer) > _MAX_BEARER_CHARS:
        raise unauthenticated()
    value = bearer.strip()
    if value[:7].lower() == "bearer ":
        value = value[7:].strip()
    match = _TOKEN.fullmatch(value)
    if match is None:
        raise unauthenticated()
    return match.group("token_id"), match.group("secret")


def secret_matches(secret: str, stored_sha256: bytes) -> bool:
    return hmac.compare_digest(secret_hash(secret), bytes(stored_sha256))
