"""Internal index routes talk to a real gRPC indexer double."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from litestar.testing import AsyncTestClient

from gateway_auth import StaticAuthenticator
from gateway_mesh import Mesh, as_loopback
from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.app import create_app
from ragmesh_gateway.composition import build_deps

INDEX = "/api/rag/v1/internal/index"


@pytest.fixture
async def client(mesh: Mesh) -> AsyncIterator[AsyncTestClient]:
    """The local operator: authentication disabled, calling from 127.0.0.1."""
    async with AsyncTestClient(as_loopback(create_app(mesh.settings()))) as test_client:
        yield test_client


async def test_build_promote_rollback_status(client: AsyncTestClient, mesh: Mesh) -> None:
    build = await client.post(
        f"{INDEX}/build", json={"corpus": "docs@1", "root": "/srv/docs", "force": True, "reason": "nightly"}
    )
    assert build.status_code == 200
    assert build.json()["index_version"] == "v2" and build.json()["files"][0]["status"] == "indexed"
    sent = mesh.indexer.requests[-1]
    assert (sent.corpus.corpus, sent.corpus.root, sent.force, sent.actor, sent.reason, sent.admin) == (
        "docs@1",
        "/srv/docs",
        True,
        "local",
        "nightly",
        True,  # the local operator (auth disabled, loopback)
    )

    promote = await client.post(f"{INDEX}/promote", json={"corpus": "docs@1", "index_version": "v2"})
    assert promote.status_code == 200 and promote.json()["active_version"] == "v2"
    assert promote.json()["changed"] is True

    rollback = await client.post(f"{INDEX}/rollback", json={"corpus": "docs@1", "reason": "bad build"})
    assert rollback.status_code == 200 and rollback.json()["active_version"] == "v1"

    status = await client.get(f"{INDEX}/status", params={"corpus": "docs@1"})
    assert status.status_code == 200
    assert status.json()["versions"] == [
        {
            "index_version": "v1",
            "state": "active",
            "created_at": "",
            "actor": "",
            "reason": "",
            "chunks": 0,
            "documents": 0,
        }
    ]


async def test_indexer_errors_keep_their_code(client: AsyncTestClient) -> None:
    response = await client.post(f"{INDEX}/promote", json={"corpus": "docs@1", "index_version": "missing"})
    assert response.status_code == 404 and response.json()["code"] == "NOT_FOUND"


async def test_non_admin_callers_are_refused_before_the_indexer(mesh: Mesh) -> None:
    settings = mesh.settings()
    deps = build_deps(settings)
    deps.authenticator = StaticAuthenticator(Caller("reader", scopes=frozenset({"rag:search", "rag:read"})))
    async with AsyncTestClient(create_app(settings, deps)) as reader:
        response = await reader.post(f"{INDEX}/promote", json={"corpus": "docs@1", "index_version": "v2"})
    assert response.status_code == 403 and response.json()["code"] == "PERMISSION_DENIED"
    assert mesh.indexer.requests == []


@pytest.mark.parametrize(("scopes", "admin"), [
    ({"rag:index:build", "rag:index:promote"}, False),
    ({"rag:admin"}, True),
])
async def test_the_indexer_learns_whether_the_caller_is_an_admin(
    mesh: Mesh, scopes: set[str], admin: bool
) -> None:
    # A build token alone may not widen what the indexer reads or publish a corpus
    # (ragmesh_indexer.corpus_roots decides, with this flag).
    settings = mesh.settings()
    deps = build_deps(settings)
    deps.authenticator = StaticAuthenticator(Caller("ci", scopes=frozenset(scopes)))
    async with AsyncTestClient(create_app(settings, deps)) as ci:
        response = await ci.post(f"{INDEX}/build", json={"corpus": "mirror@1", "root": "/srv/internal",
                                                         "visibility": "public"})
    assert response.status_code == 200, response.text
    sent = mesh.indexer.requests[-1]
    assert (sent.admin, sent.corpus.visibility) == (admin, "public")


async def test_a_build_may_leave_root_and_visibility_to_the_registry(client: AsyncTestClient, mesh: Mesh) -> None:
    response = await client.post(f"{INDEX}/build", json={"corpus": "docs@1"})
    assert response.status_code == 200, response.text
    sent = mesh.indexer.requests[-1]
    assert (sent.corpus.root, sent.corpus.visibility) == ("", "")


async def test_remove_passes_dry_run_and_reason_and_names_what_goes(client: AsyncTestClient, mesh: Mesh) -> None:
    dry = await client.post(f"{INDEX}/remove", json={"corpus": "docs@1", "dry_run": True, "reason": "mistake"})
    assert dry.status_code == 200, dry.text
    body = dry.json()
    assert body["dry_run"] is True and body["collections_deleted"] == [] and body["alias_existed"] is True
    assert body["versions"] == [{"index_version": "v1", "state": "active", "collection": "rm__docs-1__v1",
                                 "chunks": 6, "collection_exists": True}]
    sent = mesh.indexer.requests[-1]
    assert (sent.corpus, sent.dry_run, sent.actor, sent.reason) == ("docs@1", True, "local", "mistake")
    done = await client.post(f"{INDEX}/remove", json={"corpus": "docs@1"})
    assert done.status_code == 200 and done.json()["collections_deleted"] == ["rm__docs-1__v1"]
    unknown = await client.post(f"{INDEX}/remove", json={"corpus": "missing@0"})
    assert unknown.status_code == 404 and unknown.json()["code"] == "NOT_FOUND"


async def test_remove_needs_rag_admin_not_the_index_scopes(mesh: Mesh) -> None:
    settings = mesh.settings()
    deps = build_deps(settings)
    deps.authenticator = StaticAuthenticator(Caller("ci", scopes=frozenset({"rag:index:build", "rag:index:promote"})))
    async with AsyncTestClient(create_app(settings, deps)) as ci:
        response = await ci.post(f"{INDEX}/remove", json={"corpus": "docs@1", "dry_run": True})
    assert response.status_code == 403 and "rag:admin" in response.json()["message"]
    assert mesh.indexer.requests == []
