"""HTTP/MCP contract of the corpus catalogue."""

from __future__ import annotations

from typing import Annotated

import msgspec
from msgspec import Meta


class ListCorporaRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """No arguments: lists every corpus the caller may read."""


class CorpusView(msgspec.Struct, kw_only=True):
    corpus: Annotated[str, Meta(description="Corpus id; use it in filters.corpus.")]
    library: str
    version: str
    visibility: Annotated[str, Meta(description="public or internal.")]
    active_index_version: str | None
    points: int
    documents: int
    state: Annotated[str, Meta(description="active or empty.")]
    license: str
    source_url: str
    embedder: Annotated[str, Meta(description="The embedding model that built the active index: name, revision "
                                              "or weights hash, dtype, dimension.")] = ""
    search: Annotated[str, Meta(description="hybrid (vector + keyword), keyword_only (the serving embedder is not "
                                            "declared compatible with the index's), or unknown.")] = ""
    keyword_only_reason: Annotated[str | None, Meta(description="Why the corpus is searched by keywords only.")] = None


class CorporaResponse(msgspec.Struct, kw_only=True):
    request_id: str
    corpora: list[CorpusView]


class StatsRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """No arguments: numbers over every corpus the caller may read."""


class StatsResponse(msgspec.Struct, kw_only=True):
    request_id: str
    corpora: int
    points: int
    documents: int
    embedding_model: str
    vector_size: int
    lexical_tokenizer: str
    store: str
