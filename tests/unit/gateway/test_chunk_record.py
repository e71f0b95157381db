"""A chunk's fields are declared once (ragmesh_common.chunk_record) and every conversion follows them."""

from __future__ import annotations

import dataclasses

from ragmesh.v1 import common_pb2
from ragmesh_common.chunk_record import CHUNK_FIELDS, Chunk
from ragmesh_gateway.clients.convert import chunk_from_pb, chunk_to_pb
from ragmesh_gateway.search.presenters import article_chunk
from ragmesh_gateway.search.schemas import ArticleChunk
from ragmesh_gateway.search.service import GuardedChunk


def distinct_chunk() -> Chunk:
    """Every field set, and no two alike, so that a field dropped or swapped shows."""
    values = {}
    for n, field in enumerate(dataclasses.fields(Chunk), start=1):
        if field.name in ("heading_path", "tags"):
            values[field.name] = (f"{field.name}-a", f"{field.name}-b")
        elif field.type == "int":
            values[field.name] = n
        else:
            values[field.name] = f"{field.name}-value"
    return Chunk(**values)


def test_the_record_declares_exactly_the_protobuf_fields_in_order() -> None:
    assert CHUNK_FIELDS == tuple(f.name for f in common_pb2.Chunk.DESCRIPTOR.fields)


def test_protobuf_round_trip_keeps_every_field() -> None:
    chunk = distinct_chunk()
    message = chunk_to_pb(chunk)
    assert {f.name: getattr(message, f.name) for f in common_pb2.Chunk.DESCRIPTOR.fields if not f.is_repeated} == {
        n: v for n, v in dataclasses.asdict(chunk).items() if not isinstance(v, tuple)
    }
    back = chunk_from_pb(common_pb2.Chunk.FromString(message.SerializeToString()))
    assert back == chunk
    assert isinstance(back.heading_path, tuple) and isinstance(back.tags, tuple)


def test_the_public_chunk_shows_the_shared_fields_as_they_are() -> None:
    chunk = distinct_chunk()
    shown = article_chunk(GuardedChunk(chunk, ("rule",)))
    shared = set(ArticleChunk.__struct_fields__) & set(CHUNK_FIELDS) - {"url", "content", "page", "heading_path"}
    assert shared >= {"chunk_id", "parent_id", "doc_id", "corpus", "library", "version", "title", "quote",
                      "source_path", "download_path", "index_version"}
    for name in shared:
        assert getattr(shown, name) == getattr(chunk, name), name
    assert shown.heading_path == list(chunk.heading_path)
    assert shown.source_lines == [chunk.line_start, chunk.line_end]
    assert shown.page == chunk.page and shown.content == chunk.content and shown.guard_rules == ["rule"]


def test_domain_records_convert_by_field_name() -> None:
    from ragmesh.v1 import indexer_pb2, retrieval_pb2

    from ragmesh_gateway.catalog import CorpusInfo
    from ragmesh_gateway.clients.convert import message_from, record_from
    from ragmesh_gateway.index_admin.ports import CorpusSpec, FileReport, PromoteResult

    reply = indexer_pb2.PromoteResponse(corpus="c", active_version="v2", previous_version="v1", changed=True)
    assert record_from(PromoteResult, reply) == PromoteResult("c", "v2", "v1", True)
    report = record_from(FileReport, indexer_pb2.FileReport(path="a.md", status="ok", chunks=3))
    assert report == FileReport(path="a.md", status="ok", chunks=3)
    spec = CorpusSpec(corpus="c", include=["*.md"], chunking="fixed")
    assert message_from(indexer_pb2.CorpusSpec, spec) == indexer_pb2.CorpusSpec(
        corpus="c", include=["*.md"], chunking="fixed")
    info = record_from(CorpusInfo, retrieval_pb2.CorpusInfo(corpus="c"), visibility="public", state="empty")
    assert info.corpus == "c" and info.visibility == "public"


def test_a_record_field_without_a_protobuf_twin_must_be_given() -> None:
    import pytest
    from ragmesh.v1 import common_pb2

    from ragmesh_gateway.clients.convert import record_from
    from ragmesh_gateway.search.models import ScoredChunk

    with pytest.raises(TypeError, match="chunk"):
        record_from(ScoredChunk, common_pb2.SearchFilters())
