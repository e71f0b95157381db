"""Corpus read access, default deny: public corpora for everyone, internal ones by grant.

:func:`readable_from` is the rule (pure); :class:`AccessStore` keeps grants in PostgreSQL (table
``corpus_grants``). Any visibility other than ``public`` is treated like ``internal``, so a typo or
a visibility added later never opens a corpus. ``rag:admin`` reads every corpus: an admin could
grant itself anything anyway.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import asyncpg

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.tokens import Principal, check_client_id
from ragmesh_gateway.store.database import database_errors

PUBLIC = "public"
INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class Grant:
    client_id: str
    corpus_id: str
    granted_at: datetime


def check_corpus_id(corpus_id: str) -> str:
    if not isinstance(corpus_id, str) or not 1 <= len(corpus_id) <= 200 or not corpus_id.isprintable():
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "corpus id must be 1-200 printable characters")
    return corpus_id


def readable_from(principal: Principal | None, all_corpora: Iterable[tuple[str, str]],
                  granted: Iterable[str] = ()) -> set[str]:
    """Corpus ids from ``(corpus_id, visibility)`` pairs that ``principal`` (None: anonymous) may read."""
    corpora = list(all_corpora)
    if principal is not None and principal.is_admin:
        return {corpus_id for corpus_id, _ in corpora}
    grants = set(granted) if principal is not None else set()
    return {corpus_id for corpus_id, visibility in corpora if visibility == PUBLIC or corpus_id in grants}


class AccessStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self._pool = pool

    async def grant(self, client_id: str, corpus: str) -> bool:
        """Let ``client_id`` read ``corpus``; False when the grant already existed."""
        check_client_id(client_id)
        check_corpus_id(corpus)
        async with database_errors("grant corpus access"):
            created = await self._pool.fetchval(
                "INSERT INTO corpus_grants (client_id, corpus_id) VALUES ($1, $2) "
                "ON CONFLICT DO NOTHING RETURNING client_id",
                client_id, corpus,
            )
        return created is not None

    async def revoke(self, client_id: str, corpus: str) -> bool:
        """Remove a grant; False when there was none."""
        if not isinstance(client_id, str) or not isinstance(corpus, str):
            return False
        async with database_errors("revoke corpus access"):
            removed = await self._pool.fetchval(
                "DELETE FROM corpus_grants WHERE client_id = $1 AND corpus_id = $2 RETURNING client_id",
                client_id, corpus,
            )
        return removed is not None

    async def list(self, client_id: str | None = None) -> list[Grant]:
        async with database_errors("list corpus grants"):
            rows = await self._pool.fetch(
                "SELECT client_id, corpus_id, granted_at FROM corpus_grants "
                "WHERE $1::text IS NULL OR client_id = $1 ORDER BY client_id, corpus_id",
                client_id,
            )
        return [Grant(row["client_id"], row["corpus_id"], row["granted_at"]) for row in rows]

    async def granted_corpora(self, client_id: str) -> set[str]:
        async with database_errors("read corpus grants"):
            rows = await self._pool.fetch(
                "SELECT corpus_id FROM corpus_grants WHERE client_id = $1", client_id)
        return {row["corpus_id"] for row in rows}

    async def readable_corpora(self, principal: Principal | None,
                               all_corpora: Iterable[tuple[str, str]]) -> set[str]:
        corpora = list(all_corpora)
        granted: set[str] = set()
        # Anonymous callers, admins and all-public lists need no database round trip.
        if principal is not None and not principal.is_admin and any(v != PUBLIC for _, v in corpora):
            granted = await self.granted_corpora(principal.client_id)
        return readable_from(principal, corpora, granted)
