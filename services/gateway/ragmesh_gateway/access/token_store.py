"""TokenStore: API tokens in PostgreSQL (table ``api_tokens`` in the gateway schema).

The pool's search_path points at the gateway schema (``ragmesh_common.pg.create_pool``), so SQL
names tables unqualified.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta
from typing import Any

import asyncpg

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.tokens import (
    Principal,
    Scope,
    TokenInfo,
    check_client_id,
    mint_token,
    parse_scopes,
    secret_matches,
    split_bearer,
    unauthenticated,
)
from ragmesh_gateway.store.database import database_errors


class TokenStore:
    def __init__(self, pool: asyncpg.Pool, *, touch_interval: timedelta = timedelta(seconds=60)) -> None:
        self._pool = pool
        # last_used_at is written at most once per interval per token, not on every request.
        self._touch_interval = touch_interval

    async def create(self, client_id: str, scopes: Iterable[Scope | str]) -> tuple[str, str]:
        """A new token for ``client_id``: ``(token_id, plaintext)``; the plaintext is never stored."""
        check_client_id(client_id)
        parsed = sorted(s.value for s in parse_scopes(scopes))
        for _attempt in range(3):  # a 64-bit id collision is astronomically rare; retry anyway
            token = mint_token()
            async with database_errors("create token"):
                inserted = await self._pool.fetchval(
                    """INSERT INTO api_tokens (token_id, secret_sha256, client_id, scopes)
                       VALUES ($1, $2, $3, $4) ON CONFLICT (token_id) DO NOTHING RETURNING token_id""",
                    token.token_id, token.secret_sha256, client_id, parsed,
                )
            if inserted is not None:
                return token.token_id, token.plaintext
        raise RagmeshError(ErrorCode.INTERNAL, "could not allocate a token id")

    async def revoke(self, token_id: str) -> bool:
        """Revoke an active token; False when no active token has this id (unknown or revoked)."""
        if not isinstance(token_id, str) or len(token_id) > 64:
            return False
        async with database_errors("revoke token"):
            revoked = await self._pool.fetchval(
                "UPDATE api_tokens SET revoked_at = now() WHERE token_id = $1 AND revoked_at IS NULL "
                "RETURNING token_id",
                token_id,
            )
        return revoked is not None

    async def list(self, client_id: str | None = None, *, include_revoked: bool = True) -> list[TokenInfo]:
        async with database_errors("list tokens"):
            rows = await self._pool.fetch(
                """SELECT token_id, client_id, scopes, created_at, revoked_at, last_used_at FROM api_tokens
                   WHERE ($1::text IS NULL OR client_id = $1) AND ($2 OR revoked_at IS NULL)
                   ORDER BY created_at, token_id""",
                client_id, include_revoked,
            )
        return [_token_info(row) for row in rows]

    async def authenticate(self, bearer: object) -> Principal:
        """The principal behind a bearer token; RagmeshError(UNAUTHENTICATED) for anything else."""
        token_id, secret = split_bearer(bearer)
        async with database_errors("authenticate"):
            row = await self._pool.fetchrow(
                """SELECT client_id, scopes, secret_sha256, revoked_at,
                          (last_used_at IS NULL OR last_used_at < now() - $2::interval) AS stale
                   FROM api_tokens WHERE token_id = $1""",
                token_id, self._touch_interval,
            )
        if row is None or row["revoked_at"] is not None or not secret_matches(secret, row["secret_sha256"]):
            raise unauthenticated()
        if row["stale"]:
            async with database_errors("authenticate"):
                await self._pool.execute(
                    "UPDATE api_tokens SET last_used_at = now() WHERE token_id = $1", token_id)
        return Principal(client_id=row["client_id"], scopes=_scopes(row["scopes"]), token_id=token_id)


def _scopes(values: list[str]) -> frozenset[Scope]:
    # A scope removed from the code since the token was made is ignored rather than fatal.
    return frozenset(Scope(v) for v in values if v in Scope._value2member_map_)


def _token_info(row: Any) -> TokenInfo:
    return TokenInfo(
        token_id=row["token_id"],
        client_id=row["client_id"],
        scopes=_scopes(row["scopes"]),
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        last_used_at=row["last_used_at"],
    )
