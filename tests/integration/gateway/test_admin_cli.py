"""`ragmesh token|access` run the gateway's admin entry point against a real PostgreSQL, and what they
write is what the gateway enforces on the next request."""

from __future__ import annotations

import httpx

from gateway_mesh import Mesh
from loopback_server import serve
from gateway_process import gateway_env
from gateway_tokens import INTERNAL, bearer, schema, token_app, with_internal_corpus  # noqa: F401 - fixtures
from test_cli import OK, UNAVAILABLE, USAGE, ragmesh

SEARCH = "/api/rag/v1/search"


async def test_token_and_access_lifecycle(mesh: Mesh, pg_url: str, schema: str) -> None:
    env = gateway_env(RAGMESH_POSTGRES_URL=pg_url, RAGMESH_GATEWAY_DB_SCHEMA=schema)
    created = await ragmesh("token", "create", "--client", "ci-bot", "--scope", "rag:search",
                            "--scope", "rag:read,rag:answer", env=env)
    assert created.code == OK, created.stderr
    made = created.json()
    plaintext = made["token"]
    assert plaintext.startswith(f"rmk_{made['token_id']}_") and made["client_id"] == "ci-bot"
    assert made["scopes"] == ["rag:answer", "rag:read", "rag:search"] and made["active"] is True
    assert "shown once" in created.stderr

    listed = await ragmesh("token", "list", "--client", "ci-bot", env=env)
    assert listed.code == OK
    assert [t["token_id"] for t in listed.json()["tokens"]] == [made["token_id"]]
    assert plaintext.split("_", 2)[2] not in listed.stdout  # the secret is never shown again

    with_internal_corpus(mesh, chunks=1)
    async with serve(token_app(mesh, pg_url, schema, allow_anonymous=False)) as url:
        async with httpx.AsyncClient(base_url=url, headers=bearer(plaintext)) as http:
            before = await http.post(SEARCH, json={"query": "q", "filters": {"corpus": INTERNAL}})
            granted = await ragmesh("access", "grant", "--client", "ci-bot", "--corpus", INTERNAL, env=env)
            again = await ragmesh("access", "grant", "--client", "ci-bot", "--corpus", INTERNAL, env=env)
            grants = await ragmesh("access", "list", env=env)
            with_grant = await http.post(SEARCH, json={"query": "q", "filters": {"corpus": INTERNAL}})
            taken = await ragmesh("access", "revoke", "--client", "ci-bot", "--corpus", INTERNAL, env=env)
            revoked = await ragmesh("token", "revoke", made["token_id"], env=env)
            after = await http.post(SEARCH, json={"query": "q"})
    assert before.status_code == 200 and before.json()["results"] == []
    assert (granted.json()["granted"], again.json()["granted"]) == (True, False)
    assert [(g["client_id"], g["corpus"]) for g in grants.json()["grants"]] == [("ci-bot", INTERNAL)]
    assert [r["corpus"] for r in with_grant.json()["results"]] == [INTERNAL]
    assert taken.json() == {"client_id": "ci-bot", "corpus": INTERNAL, "revoked": True}
    assert revoked.json() == {"token_id": made["token_id"], "revoked": True}
    assert after.status_code == 401
    active = await ragmesh("token", "list", "--active", env=env)
    assert active.json() == {"tokens": []}


async def test_admin_refusals_use_the_cli_exit_codes(pg_url: str, schema: str) -> None:
    env = gateway_env(RAGMESH_POSTGRES_URL=pg_url, RAGMESH_GATEWAY_DB_SCHEMA=schema)
    unknown_scope = await ragmesh("token", "create", "--client", "x", "--scope", "rag:everything", env=env)
    bad_client = await ragmesh("token", "create", "--client", "no spaces", "--scope", "rag:read", env=env)
    missing_option = await ragmesh("access", "grant", "--client", "x", env=env)
    down = await ragmesh("token", "list", env=gateway_env(RAGMESH_POSTGRES_URL="postgresql://postgres@127.0.0.1:1/x"))
    assert [r.code for r in (unknown_scope, bad_client, missing_option)] == [USAGE] * 3
    assert "unknown scope" in unknown_scope.stderr
    assert down.code == UNAVAILABLE and "UNAVAILABLE" in down.stderr
    assert all(r.stdout == "" for r in (unknown_scope, bad_client, missing_option, down))


async def test_without_a_url_or_a_running_mesh_the_state_folder_is_named(tmp_path) -> None:
    # With a mesh serving from the folder, the embedded PostgreSQL is used (tests/e2e/test_lifecycle.py).
    state = tmp_path / "state"
    env = {k: v for k, v in gateway_env().items() if k != "RAGMESH_POSTGRES_URL"}
    env["RAGMESH_STATE_DIR"] = str(state)
    listed = await ragmesh("token", "list", env=env)
    assert listed.code == USAGE and listed.stdout == ""
    assert "RAGMESH_POSTGRES_URL is not set" in listed.stderr and f"ragmesh up --state-dir {state}" in listed.stderr
    assert "Traceback" not in listed.stderr and not state.exists()
    helped = await ragmesh("token", "--help", env=env)
    assert helped.code == 0 and "create" in helped.stdout
