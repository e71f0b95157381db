"""Token and grant operations as JSON-ready dicts: what ``python -m ragmesh_gateway.admin`` prints.

Nothing here prints a secret's hash or a stored secret: the plaintext of a new token exists only in
the answer of ``create_token``, once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ragmesh_gateway.access.corpus_access import AccessStore
from ragmesh_gateway.access.token_store import TokenStore
from ragmesh_gateway.access.tokens import TokenInfo


def _when(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def token_view(info: TokenInfo) -> dict[str, Any]:
    return {
        "token_id": info.token_id,
        "client_id": info.client_id,
        "scopes": sorted(s.value for s in info.scopes),
        "active": info.active,
        "created_at": _when(info.created_at),
        "revoked_at": _when(info.revoked_at),
        "last_used_at": _when(info.last_used_at),
    }


async def create_token(tokens: TokenStore, client_id: str, scopes: list[str]) -> dict[str, Any]:
    token_id, plaintext = await tokens.create(client_id, scopes)
    (info,) = [t for t in await tokens.list(client_id) if t.token_id == token_id]
    return {**token_view(info), "token": plaintext}


async def revoke_token(tokens: TokenStore, token_id: str) -> dict[str, Any]:
    return {"token_id": token_id, "revoked": await tokens.revoke(token_id)}


async def list_tokens(tokens: TokenStore, client_id: str | None, *, active_only: bool) -> dict[str, Any]:
    listed = await tokens.list(client_id, include_revoked=not active_only)
    return {"tokens": [token_view(t) for t in listed]}


async def grant(access: AccessStore, client_id: str, corpus: str) -> dict[str, Any]:
    return {"client_id": client_id, "corpus": corpus, "granted": await access.grant(client_id, corpus)}


async def revoke_grant(access: AccessStore, client_id: str, corpus: str) -> dict[str, Any]:
    return {"client_id": client_id, "corpus": corpus, "revoked": await access.revoke(client_id, corpus)}


async def list_grants(access: AccessStore, client_id: str | None) -> dict[str, Any]:
    grants = await access.list(client_id)
    return {
        "grants": [
            {"client_id": g.client_id, "corpus": g.corpus_id, "granted_at": _when(g.granted_at)} for g in grants
        ]
    }
