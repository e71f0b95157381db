"""Tokens, scopes, corpus grants and feedback against a real PostgreSQL, each test in its own schema."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest
from prometheus_client import REGISTRY

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.pg import applied_migrations, create_pool
from ragmesh_gateway.access.corpus_access import AccessStore
from ragmesh_gateway.access.token_store import TokenStore
from ragmesh_gateway.access.tokens import Principal, Scope
from ragmesh_gateway.feedback.store import FeedbackStore
from ragmesh_gateway.store.database import migrate

CORPORA = [("handbook", "public"), ("payroll", "internal"), ("roadmap", "internal"), ("odd", "secret")]


@pytest.fixture()
async def pool(pg_url: str, unique_schema: Callable[..., str]) -> AsyncIterator[asyncpg.Pool]:
    schema = unique_schema("gw")
    pool = await create_pool(pg_url, schema=schema)
    await migrate(pool, schema=schema)
    assert await applied_migrations(pool, schema=schema) == [
        "0001_api_tokens", "0002_corpus_grants", "0003_feedback"]
    assert await migrate(pool, schema=schema) == []  # idempotent
    yield pool
    await pool.close()


async def _expect_unauthenticated(tokens: TokenStore, bearer: object) -> None:
    with pytest.raises(RagmeshError) as info:
        await tokens.authenticate(bearer)
    assert info.value.code is ErrorCode.UNAUTHENTICATED
    # The message is the same for every failure and never echoes what was sent.
    assert info.value.message == "missing, malformed, unknown or revoked token"


async def test_create_authenticate_revoke(pool: asyncpg.Pool) -> None:
    tokens = TokenStore(pool)
    token_id, plaintext = await tokens.create("ci-bot", [Scope.SEARCH, "rag:read"])
    assert plaintext.startswith(f"rmk_{token_id}_") and len(plaintext) == 4 + 16 + 1 + 43

    principal = await tokens.authenticate(plaintext)
    assert principal == Principal(client_id="ci-bot", scopes=frozenset({Scope.SEARCH, Scope.READ}),
                                  token_id=token_id)
    assert await tokens.authenticate(f"Bearer {plaintext}") == principal

    # Only the hash of the secret is stored.
    row = await pool.fetchrow("SELECT * FROM api_tokens WHERE token_id = $1", token_id)
    secret = plaintext.split("_", 2)[2]
    assert bytes(row["secret_sha256"]) == hashlib.sha256(secret.encode()).digest()
    assert plaintext not in str(dict(row)) and secret not in str(dict(row))
    assert row["last_used_at"] is not None

    assert await tokens.revoke(token_id) is True
    assert await tokens.revoke(token_id) is False  # already revoked
    await _expect_unauthenticated(tokens, plaintext)
    (info,) = await tokens.list("ci-bot")
    assert info.token_id == token_id and info.revoked_at is not None and not info.active
    assert await tokens.list("ci-bot", include_revoked=False) == []


async def test_wrong_secret_and_unknown_id_are_refused(pool: asyncpg.Pool) -> None:
    tokens = TokenStore(pool)
    token_id, plaintext = await tokens.create("app", [Scope.SEARCH])
    last = plaintext[-1]
    await _expect_unauthenticated(tokens, plaintext[:-1] + ("A" if last != "A" else "B"))
    other_id, other_plaintext = await tokens.create("app", [Scope.SEARCH])
    # A valid secret presented under another token's id is refused.
    await _expect_unauthenticated(tokens, f"rmk_{token_id}_{other_plaintext.split('_', 2)[2]}")
    await _expect_unauthenticated(tokens, f"rmk_{'0' * 16}_{plaintext.split('_', 2)[2]}")


@pytest.mark.parametrize(
    "bearer",
    [None, "", "   ", "Bearer", "Bearer ", "rmk_", "rmk__", "rmk_abc_def", "token", 12345, b"rmk_bytes",
     ["rmk"], "rmk_" + "g" * 16 + "_" + "a" * 43, "rmk_" + "a" * 16 + "_" + "a" * 42,
     "rmk_" + "a" * 16 + "_" + "a" * 44, "rmk_" + "A" * 16 + "_" + "a" * 43,
     "rmk_" + "a" * 16 + "_" + "a" * 42 + "\n", "rmk_" + "a" * 16 + "_" + "a" * 42 + "é",
     "rmk_" + "a" * 16 + "_" + "a" * 42 + "\x00", "x" * 100_000, "Basic dXNlcjpwYXNz",
     "rmk_'; DROP TABLE api_tokens; --"],
)
async def test_malformed_tokens_are_unauthenticated(pool: asyncpg.Pool, bearer: object) -> None:
    await _expect_unauthenticated(TokenStore(pool), bearer)


async def test_scopes_are_validated_and_admin_implies_all(pool: asyncpg.Pool) -> None:
    tokens = TokenStore(pool)
    with pytest.raises(RagmeshError) as info:
        await tokens.create("app", ["rag:search", "rag:everything"])
    assert info.value.code is ErrorCode.INVALID_ARGUMENT
    with pytest.raises(RagmeshError):
        await tokens.create("bad client id!", ["rag:search"])

    _, reader_token = await tokens.create("reader", [Scope.SEARCH, Scope.READ])
    reader = await tokens.authenticate(reader_token)
    assert reader.has_scope("rag:search") and not reader.has_scope(Scope.ANSWER)
    with pytest.raises(RagmeshError) as denied:
        reader.require(Scope.INDEX_PROMOTE)
    assert denied.value.code is ErrorCode.PERMISSION_DENIED

    _, builder_token = await tokens.create("builder", [Scope.INDEX_BUILD])
    builder = await tokens.authenticate(builder_token)
    assert builder.scopes == frozenset({Scope.INDEX_BUILD}) and not builder.has_scope(Scope.INDEX_PROMOTE)

    _, admin_token = await tokens.create("ops", [Scope.ADMIN])
    admin = await tokens.authenticate(admin_token)
    assert all(admin.has_scope(scope) for scope in Scope)

    _, none_token = await tokens.create("nobody", [])
    assert (await tokens.authenticate(none_token)).scopes == frozenset()
    assert [t.client_id for t in await tokens.list()] == ["reader", "builder", "ops", "nobody"]


async def test_grants_and_readable_corpora(pool: asyncpg.Pool) -> None:
    access, tokens = AccessStore(pool), TokenStore(pool)
    _, granted_token = await tokens.create("analyst", [Scope.SEARCH])
    _, plain_token = await tokens.create("visitor", [Scope.SEARCH])
    _, admin_token = await tokens.create("ops", [Scope.ADMIN])
    analyst = await tokens.authenticate(granted_token)
    visitor = await tokens.authenticate(plain_token)
    admin = await tokens.authenticate(admin_token)

    assert await access.grant("analyst", "payroll") is True
    assert await access.grant("analyst", "payroll") is False  # idempotent
    assert await access.grant("analyst", "odd") is True
    assert await access.grant("visitor", "roadmap") is True

    assert await access.readable_corpora(None, CORPORA) == {"handbook"}
    assert await access.readable_corpora(visitor, CORPORA) == {"handbook", "roadmap"}
    # An unknown visibility ("secret") is treated as internal: readable only through a grant.
    assert await access.readable_corpora(analyst, CORPORA) == {"handbook", "payroll", "odd"}
    assert await access.readable_corpora(admin, CORPORA) == {"handbook", "payroll", "roadmap", "odd"}
    # A grant for a corpus that is not listed does not conjure it up.
    assert await access.grant("visitor", "ghost") is True
    assert "ghost" not in await access.readable_corpora(visitor, CORPORA)

    assert [(g.client_id, g.corpus_id) for g in await access.list()] == [
        ("analyst", "odd"), ("analyst", "payroll"), ("visitor", "ghost"), ("visitor", "roadmap")]
    assert [g.corpus_id for g in await access.list("analyst")] == ["odd", "payroll"]

    assert await access.revoke("analyst", "payroll") is True
    assert await access.revoke("analyst", "payroll") is False
    assert await access.readable_corpora(analyst, CORPORA) == {"handbook", "odd"}

    with pytest.raises(RagmeshError) as info:
        await access.grant("analyst", "")
    assert info.value.code is ErrorCode.INVALID_ARGUMENT


async def test_feedback_is_stored_and_counted(pool: asyncpg.Pool) -> None:
    feedback = FeedbackStore(pool)
    before = REGISTRY.get_sample_value("ragmesh_feedback_total", {"rating": "down"}) or 0.0
    first = await feedback.add("req-1", 1, "great answer", client_id="analyst")
    second = await feedback.add("req-1", -1, "cited the wrong section\x00", client_id=None)
    await feedback.add("req-2", 1)
    assert REGISTRY.get_sample_value("ragmesh_feedback_total", {"rating": "down"}) == before + 1

    rows = await feedback.list("req-1")
    assert [(f.feedback_id, f.rating, f.comment, f.client_id) for f in rows] == [
        (second, -1, "cited the wrong section", None), (first, 1, "great answer", "analyst")]
    assert len(await feedback.list()) == 3

    bad_inputs = [("req", 0, None), ("req", 5, None), ("req", True, None), ("", 1, None),
                  ("req\x00", 1, None), ("req", 1, "x" * 2001)]
    for bad in bad_inputs:
        with pytest.raises(RagmeshError) as info:
            await feedback.add(*bad)
        assert info.value.code is ErrorCode.INVALID_ARGUMENT


async def test_unreachable_database_is_unavailable_not_unauthenticated(pool: asyncpg.Pool) -> None:
    tokens = TokenStore(pool)
    _, plaintext = await tokens.create("app", [Scope.SEARCH])
    await pool.close()
    with pytest.raises(RagmeshError) as info:
        await tokens.authenticate(plaintext)
    assert info.value.code is ErrorCode.UNAVAILABLE
