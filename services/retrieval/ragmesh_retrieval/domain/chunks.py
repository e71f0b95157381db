"""Point payloads (ChunkPayload) -> Chunk, with parent expansion."""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from ragmesh_common.index_schema import ChunkPayload, index_version_of

from ragmesh_retrieval.domain.model import Chunk

log = logging.getLogger("ragmesh.retrieval.chunks")


def chunk_from_payload(payload: dict[str, Any], collection: str, *, include_content: bool) -> Chunk | None:
    """None (and a warning) for a point whose payload is not a ChunkPayload."""
    try:
        stored = msgspec.convert(payload, ChunkPayload)
    except msgspec.ValidationError as exc:
        log.warning("point payload unreadable", extra={"fields": {"collection": collection, "error": str(exc)[:200]}})
        return None
    return Chunk(
        chunk_id=stored.chunk_id,
        parent_id=stored.parent_id,
        doc_id=stored.doc_id,
        corpus=stored.corpus,
        library=stored.library,
        version=stored.version,
        title=stored.title,
        heading_path=list(stored.heading_path),
        url=stored.url,
        quote=stored.quote,
        # Parent expansion: the section around the chunk, for reading; the quote stays the chunk
        # itself, the exact lines a citation points at. A chunk that is its own parent has no
        # parent_content, so its quote is the content.
        content=(stored.parent_content or stored.quote) if include_content else "",
        source_path=stored.source_path,
        line_start=stored.line_start,
        line_end=stored.line_end,
        page=stored.page,
        tags=list(stored.tags),
        download_path=stored.download_path,
        # The version name users see everywhere (CLI, list_corpora, metrics), not the collection.
        index_version=index_version_of(collection),
    )
