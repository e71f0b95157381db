"""What the indexer writes and retrieval reads: point payloads, vector names, collection names.

One corpus (library + version) has many versioned collections and one alias that serves the
active one. Collection-level metadata (embedder identity, tokenizer version, corpus description)
travels with the collection through the vector-store port.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

import msgspec

from ragmesh_common.embedders.identity import EmbedderIdentity

DENSE = "dense"
SPARSE = "bm25"
PREFIX = "rm"

_UNSAFE = re.compile(r"[^a-z0-9]+")


class ChunkPayload(msgspec.Struct, forbid_unknown_fields=False):
    chunk_id: str
    parent_id: str
    doc_id: str
    corpus: str
    library: str
    version: str
    title: str
    heading_path: list[str]
    url: str
    quote: str
    source_path: str
    line_start: int = 0
    line_end: int = 0
    page: int = 0
    parent_content: str = ""
    tags: list[str] = []
    download_path: str = ""
    content_sha256: str = ""
    strategy: str = ""


class CorpusMeta(msgspec.Struct, forbid_unknown_fields=False):
    corpus: str
    library: str
    version: str
    visibility: str = "public"
    license: str = ""
    source_url: str = ""
    root: str = ""  # the corpus folder, for the gateway's /files route


class CollectionMeta(msgspec.Struct, forbid_unknown_fields=False):
    """Recorded with each versioned collection; retrieval queries with exactly these settings."""

    index_version: str
    corpus: CorpusMeta
    embedding_model: str  # TEI's model_id, as /info gave it
    vector_size: int
    lexical_version: str
    lexical_config: dict = {}
    avg_len: float = 0.0
    documents: int = 0
    chunks: int = 0
    # Which embedder made the vectors (name, revision or weights hash, dtype, pooling, dimension,
    # normalization); None in indexes built before it was recorded (embedders.compatibility).
    embedder: EmbedderIdentity | None = None


def corpus_slug(corpus: str) -> str:
    slug = _UNSAFE.sub("-", corpus.lower()).strip("-")
    return slug or "corpus"


def alias_name(corpus: str) -> str:
    return f"{PREFIX}__{corpus_slug(corpus)}"


def collection_name(corpus: str, index_version: str) -> str:
    return f"{PREFIX}__{corpus_slug(corpus)}__{index_version}"


def index_version_of(collection: str) -> str:
    return collection.rsplit("__", 1)[-1]


# What is_chunk_id accepts, as a JSON Schema / msgspec pattern (a canonical, lower-case UUID).
CHUNK_ID_PATTERN = "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"


def is_chunk_id(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except (ValueError, TypeError, AttributeError):
        return False


def embedding_text(title: str, heading_path: Sequence[str], text: str) -> str:
    """A chunk as the embedder sees it: the title and heading path give it context. The indexer
    embeds this, and the gateway sends the reranker the same text, so a runtime that cached the
    indexer's vectors answers from its cache (and scores what was indexed)."""
    context = " > ".join([t for t in [title, *heading_path] if t])
    return f"{context}\n{text}" if context and context not in text[: len(context) + 4] else text
