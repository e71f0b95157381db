"""Corpus DTOs carry the fields they declare, by name: the internal root never leaves the gateway."""

from __future__ import annotations

import msgspec

from ragmesh_gateway.catalog import CorpusInfo, IndexStats
from ragmesh_gateway.corpora.presenters import corpora_response, stats_response


def test_a_corpus_is_shown_without_its_root_and_with_empty_optionals_as_null() -> None:
    info = CorpusInfo(corpus="docs@1", library="docs", version="1", visibility="internal", points=6,
                      documents=2, state="active", license="MIT", source_url="https://x", root="/srv/secret",
                      embedder="e5", search="hybrid")
    shown = msgspec.to_builtins(corpora_response([info], "req"))
    corpus = shown["corpora"][0]
    assert "/srv/secret" not in msgspec.json.encode(shown).decode() and "root" not in corpus
    assert corpus["active_index_version"] is None and corpus["keyword_only_reason"] is None
    assert {k: corpus[k] for k in ("corpus", "visibility", "points", "state", "license", "embedder")} == {
        "corpus": "docs@1", "visibility": "internal", "points": 6, "state": "active", "license": "MIT",
        "embedder": "e5"}


def test_stats_carry_every_number() -> None:
    stats = IndexStats(corpora=1, points=6, documents=2, embedding_model="m", vector_size=384,
                       lexical_tokenizer="t", store="qdrant-local")
    shown = msgspec.to_builtins(stats_response(stats, "req"))
    assert shown == {"request_id": "req", "corpora": 1, "points": 6, "documents": 2, "embedding_model": "m",
                     "vector_size": 384, "lexical_tokenizer": "t", "store": "qdrant-local"}
