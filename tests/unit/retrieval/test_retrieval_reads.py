"""CorpusDirectory: chunk reads pinned to an index version, corpus listing and totals."""

from __future__ import annotations

import uuid

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import alias_name, collection_name

from retrieval_fixtures import MODEL_ID, DIMENSIONS, Doc, Mesh

ALPHA = "alpha@1.0"
BETA = "beta@2.0"


async def two_versions(mesh: Mesh) -> tuple[Doc, Doc, Doc]:
    """alpha v1 (retained) and v2 (active) share a chunk id with different text; beta v1 is active."""
    shared_id = str(uuid.uuid4())
    v1 = Doc("Old text of the retries page", "docs/retries.md", chunk_id=shared_id, parent_content="Old section")
    v2 = Doc("New text of the retries page", "docs/retries.md", chunk_id=shared_id, parent_content="New section")
    secret = Doc("Beta internal notes", "internal/notes.md")
    await mesh.index(ALPHA, [v1], index_version="v1")
    await mesh.index(ALPHA, [v2], index_version="v2")
    await mesh.index(BETA, [secret], index_version="v1", visibility="internal")
    return v1, v2, secret


async def test_batch_get_is_pinned_to_the_requested_version(mesh: Mesh) -> None:
    v1, v2, _ = await two_versions(mesh)
    old = await mesh.directory.batch_get([v1.chunk_id], "v1", [ALPHA], include_content=True)
    assert [c.quote for c in old.chunks] == [v1.text]
    assert old.chunks[0].content == "Old section"
    assert old.chunks[0].index_version == "v1"
    new = await mesh.directory.batch_get([v2.chunk_id], "v2", [ALPHA], include_content=False)
    assert [c.quote for c in new.chunks] == [v2.text]
    assert new.chunks[0].content == ""
    by_collection = await mesh.directory.batch_get([v1.chunk_id], collection_name(ALPHA, "v1"), [ALPHA], False)
    assert [c.quote for c in by_collection.chunks] == [v1.text]


async def test_empty_version_reads_the_active_index(mesh: Mesh) -> None:
    v1, v2, _ = await two_versions(mesh)
    active = await mesh.directory.batch_get([v1.chunk_id], "", [ALPHA], False)
    assert [c.quote for c in active.chunks] == [v2.text]


async def test_unknown_or_retired_version_is_gone_never_the_active_one(mesh: Mesh) -> None:
    v1, _, _ = await two_versions(mesh)
    with pytest.raises(RagmeshError) as unknown:
        await mesh.directory.batch_get([v1.chunk_id], "v9", [ALPHA], False)
    assert unknown.value.code == ErrorCode.INDEX_VERSION_GONE
    await mesh.store.delete_collection(collection_name(ALPHA, "v1"))  # retired
    with pytest.raises(RagmeshError) as retired:
        await mesh.directory.batch_get([v1.chunk_id], "v1", [ALPHA], False)
    assert retired.value.code == ErrorCode.INDEX_VERSION_GONE
    assert retired.value.grpc_status_name == "FAILED_PRECONDITION"


async def test_chunks_of_unreadable_corpora_are_reported_missing(mesh: Mesh) -> None:
    v1, _, secret = await two_versions(mesh)
    absent = str(uuid.uuid4())
    batch = await mesh.directory.batch_get([secret.chunk_id, v1.chunk_id, absent], "v1", [ALPHA], False)
    assert [c.chunk_id for c in batch.chunks] == [v1.chunk_id]
    assert batch.missing == [secret.chunk_id, absent]
    # beta's v1 exists, but only a reader of beta may learn that.
    with pytest.raises(RagmeshError) as exc:
        await mesh.directory.batch_get([secret.chunk_id], "v1", ["gamma@1"], False)
    assert exc.value.code == ErrorCode.INDEX_VERSION_GONE


async def test_batch_get_keeps_request_order_and_canonicalises_ids(mesh: Mesh) -> None:
    docs = [Doc(f"page {i}", f"docs/{i}.md") for i in range(3)]
    await mesh.index(ALPHA, docs)
    ids = [docs[2].chunk_id.upper(), docs[0].chunk_id, docs[2].chunk_id]
    batch = await mesh.directory.batch_get(ids, "v1", [ALPHA], False)
    assert [c.chunk_id for c in batch.chunks] == [docs[2].chunk_id, docs[0].chunk_id]
    assert batch.missing == []


async def test_more_than_twenty_ids_is_too_many(mesh: Mesh) -> None:
    with pytest.raises(RagmeshError) as exc:
        await mesh.directory.batch_get([str(uuid.uuid4()) for _ in range(21)], "v1", [ALPHA], False)
    assert exc.value.code == ErrorCode.TOO_MANY_IDS


@pytest.mark.parametrize("bad", ["not-a-uuid", "", "12345678-1234-1234-1234-1234567890zz", "1" * 32 + "\x00"])
async def test_malformed_chunk_ids_are_rejected(mesh: Mesh, bad: str) -> None:
    with pytest.raises(RagmeshError) as exc:
        await mesh.directory.batch_get([str(uuid.uuid4()), bad], "v1", [ALPHA], False)
    assert exc.value.code == ErrorCode.MALFORMED_CHUNK_ID


async def test_malformed_index_version_is_invalid(mesh: Mesh) -> None:
    with pytest.raises(RagmeshError) as exc:
        await mesh.directory.batch_get([str(uuid.uuid4())], "v1/../../x", [ALPHA], False)
    assert exc.value.code == ErrorCode.INVALID_ARGUMENT


async def test_list_corpora_shows_only_readable_active_corpora(mesh: Mesh) -> None:
    await two_versions(mesh)
    await mesh.index("gamma@0.1", [Doc("not active yet")], activate=False)
    listed = await mesh.directory.list_corpora([ALPHA, BETA, "gamma@0.1", "delta@1"])
    assert [c.corpus for c in listed] == [ALPHA, BETA]
    alpha = listed[0]
    assert (alpha.library, alpha.version, alpha.active_index_version) == ("alpha", "1.0", "v2")
    assert (alpha.points, alpha.documents, alpha.state) == (1, 1, "active")
    assert (alpha.license, alpha.source_url, alpha.visibility) == ("MIT", "https://example.org/alpha", "public")
    assert listed[1].visibility == "internal"
    assert [c.corpus for c in await mesh.directory.list_corpora([ALPHA])] == [ALPHA]
    assert await mesh.directory.list_corpora([]) == []


async def test_empty_active_collection_is_listed_as_empty(mesh: Mesh) -> None:
    await mesh.index(ALPHA, [])
    listed = await mesh.directory.list_corpora([ALPHA])
    assert [(c.corpus, c.points, c.state) for c in listed] == [(ALPHA, 0, "empty")]


async def test_stats_totals_over_readable_corpora(mesh: Mesh) -> None:
    await two_versions(mesh)
    stats = await mesh.directory.stats([ALPHA, BETA])
    assert (stats.corpora, stats.points, stats.documents) == (2, 2, 2)
    assert (stats.embedding_model, stats.vector_size) == (MODEL_ID, DIMENSIONS)
    assert stats.lexical_tokenizer.startswith("bm25-r")
    assert stats.store == "qdrant-local"
    only_alpha = await mesh.directory.stats([ALPHA])
    assert (only_alpha.corpora, only_alpha.points) == (1, 1)


async def test_catalog_ignores_aliases_without_ragmesh_metadata(mesh: Mesh) -> None:
    await mesh.index(ALPHA, [Doc("page")])
    await mesh.store.set_alias(alias_name("stray"), collection_name(ALPHA, "v1"))  # alias name != corpus
    mesh.catalog.invalidate()
    active = await mesh.catalog.active()
    assert list(active) == [ALPHA]


async def test_an_index_version_has_one_name_in_search_reads_and_listings(mesh: Mesh) -> None:
    """The name `ragmesh index promote --index-version` takes is the one every answer shows."""
    _, v2, _ = await two_versions(mesh)
    (listed,) = [c for c in await mesh.directory.list_corpora([ALPHA]) if c.corpus == ALPHA]
    found = await mesh.search("retries page", [ALPHA])
    read = await mesh.directory.batch_get([v2.chunk_id], "", [ALPHA], include_content=False)
    assert listed.active_index_version == "v2"
    assert found.index_versions == ["v2"]
    assert {r.chunk.index_version for r in found.results} == {"v2"}
    assert [c.index_version for c in read.chunks] == ["v2"]
