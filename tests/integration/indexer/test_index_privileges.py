"""Least privilege of the Build call (issue 12, defect 4): a caller without admin — what the gateway
sends for a token holding only rag:index:build and rag:index:promote — built
``{"corpus": "mirror@1", "root": <another corpus's internal folder>, "visibility": "public"}``,
promoted it, and every reader could then search and download the internal files.

Now the indexer refuses that before it reads a file, and whatever it refuses leaves the registry as
it was. Through the real servicer, over a real PostgreSQL registry and local Qdrant store."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ragmesh.v1 import indexer_pb2
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_indexer.corpus_roots import CorpusRootPolicy
from ragmesh_indexer.registry import CorpusSpec
from ragmesh_indexer.servicer import IndexerServicer

ROOT = Path(__file__).resolve().parents[3]
INTERNAL = "handbook@main"


@pytest.fixture
async def servicer(indexer, tmp_path: Path):
    """An admin registered an internal corpus; the servicer is then called as the gateway calls it."""
    internal = tmp_path / "corpora" / "handbook"
    shutil.copytree(ROOT / "tests" / "fixtures" / "e2e_corpus", internal)
    await indexer.builder.build(CorpusSpec(id=INTERNAL, root=str(internal), visibility="internal"),
                                force=False, actor="admin", reason="setup", admin=True)
    return IndexerServicer(indexer.registry, indexer.builder, indexer.validator, indexer.promoter,
                           indexer.inspector), internal


def build(corpus: str, root: str = "", visibility: str = "", *, admin: bool = False, dry_run: bool = False):
    return indexer_pb2.BuildRequest(corpus=indexer_pb2.CorpusSpec(corpus=corpus, root=root, visibility=visibility),
                                    actor="ci-token", reason="", admin=admin, dry_run=dry_run)


async def refused(servicer: IndexerServicer, request, code: ErrorCode) -> None:
    with pytest.raises(RagmeshError) as err:
        await servicer.Build(request, None)
    assert err.value.code is code, err.value


async def registry_state(indexer) -> list[tuple]:
    out = []
    for corpus in await indexer.registry.list_corpora():
        versions = await indexer.registry.list_versions(corpus.id)
        out.append((corpus.id, corpus.root, corpus.visibility, len(versions)))
    return out


async def test_a_mirror_of_an_internal_folder_cannot_be_made_public(servicer, indexer) -> None:
    servicer, internal = servicer
    before = await registry_state(indexer)
    await refused(servicer, build("mirror@1", str(internal), "public"), ErrorCode.PERMISSION_DENIED)
    await refused(servicer, build("mirror@1", str(internal), "public", dry_run=True), ErrorCode.PERMISSION_DENIED)
    assert await registry_state(indexer) == before
    with pytest.raises(RagmeshError) as err:
        await indexer.registry.get_corpus("mirror@1")
    assert err.value.code is ErrorCode.NOT_FOUND


async def test_a_new_corpus_from_a_builder_is_internal(servicer, indexer) -> None:
    servicer, internal = servicer
    reply = await servicer.Build(build("mirror@1", str(internal)), None)
    assert reply.index_version
    assert (await indexer.registry.get_corpus("mirror@1")).visibility == "internal"


async def test_an_existing_corpus_keeps_its_root_and_visibility(servicer, indexer, tmp_path: Path) -> None:
    servicer, internal = servicer
    elsewhere = tmp_path / "corpora" / "other"
    shutil.copytree(ROOT / "tests" / "fixtures" / "e2e_corpus", elsewhere)
    before = await registry_state(indexer)
    await refused(servicer, build(INTERNAL, str(elsewhere)), ErrorCode.PERMISSION_DENIED)
    await refused(servicer, build(INTERNAL, visibility="public"), ErrorCode.PERMISSION_DENIED)
    assert await registry_state(indexer) == before
    # A plain rebuild (no root, no visibility) is what a build token is for.
    rebuilt = await servicer.Build(build(INTERNAL), None)
    assert rebuilt.index_version
    # An admin may move it and publish it.
    moved = await servicer.Build(build(INTERNAL, str(elsewhere), "public", admin=True), None)
    assert moved.index_version
    corpus = await indexer.registry.get_corpus(INTERNAL)
    assert (corpus.root, corpus.visibility) == (str(elsewhere), "public")


async def test_roots_outside_the_allowed_folders_are_refused(servicer, indexer, tmp_path: Path) -> None:
    servicer, internal = servicer
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "keys.md").write_text("# Keys\n\nnot for readers\n", encoding="utf-8")
    link = internal / "shortcut"
    link.symlink_to(secret, target_is_directory=True)
    before = await registry_state(indexer)
    for root, code in [
        (str(secret), ErrorCode.ROOT_NOT_ALLOWED),
        ("/etc", ErrorCode.ROOT_NOT_ALLOWED),
        (f"{internal}/../../secret", ErrorCode.ROOT_NOT_ALLOWED),
        (str(link), ErrorCode.ROOT_NOT_ALLOWED),
        ("relative/path", ErrorCode.INVALID_ARGUMENT),
        (f"{internal}\x00", ErrorCode.INVALID_CHARACTER),
    ]:
        for dry_run in (False, True):
            await refused(servicer, build("probe@1", root, dry_run=dry_run), code)
    assert await registry_state(indexer) == before


async def test_configured_roots_bind_an_admin_too(indexer, tmp_path: Path) -> None:
    allowed = tmp_path / "corpora"
    shutil.copytree(ROOT / "tests" / "fixtures" / "e2e_corpus", allowed / "docs")
    outside = tmp_path / "outside"
    shutil.copytree(ROOT / "tests" / "fixtures" / "e2e_corpus", outside)
    indexer.builder.roots = CorpusRootPolicy([str(allowed)])
    servicer = IndexerServicer(indexer.registry, indexer.builder, indexer.validator, indexer.promoter,
                               indexer.inspector)
    await refused(servicer, build("outside@1", str(outside), admin=True), ErrorCode.ROOT_NOT_ALLOWED)
    reply = await servicer.Build(build("docs@1", str(allowed / "docs"), "public", admin=True), None)
    assert reply.index_version


async def test_nul_in_any_build_field_is_refused_before_the_registry(servicer, indexer) -> None:
    servicer, internal = servicer
    before = await registry_state(indexer)
    for request in (build("bad\x00@1", str(internal)),
                    indexer_pb2.BuildRequest(corpus=indexer_pb2.CorpusSpec(corpus=INTERNAL), reason="r\x00"),
                    indexer_pb2.BuildRequest(corpus=indexer_pb2.CorpusSpec(corpus=INTERNAL, license="\x00"))):
        await refused(servicer, request, ErrorCode.INVALID_CHARACTER)
    for call, request in ((servicer.Promote, indexer_pb2.PromoteRequest(corpus=INTERNAL, index_version="v", reason="\x00")),
                          (servicer.Rollback, indexer_pb2.RollbackRequest(corpus=INTERNAL, reason="a\x00b")),
                          (servicer.Status, indexer_pb2.StatusRequest(corpus="\x00"))):
        with pytest.raises(RagmeshError) as err:
            await call(request, None)
        assert err.value.code is ErrorCode.INVALID_CHARACTER
    assert await registry_state(indexer) == before
