"""Point payloads (ChunkPayload) -> the mesh's chunk record (ragmesh_common.chunk_record), with parent expansion."""

from __future__ import annotations

import logging
from typing import Any

import msgspec

from ragmesh_common.chunk_record import Chunk, chunk_from_message
from ragmesh_common.index_schema import ChunkPayload, index_version_of

log = logging.getLogger("ragmesh.retrieval.chunks")
# The payload's list fields, which the record holds as tuples.
_LISTS = frozenset(f.name for f in msgspec.structs.fields(ChunkPayload) if getattr(f.type, "__origin__", None) is list)


def chunk_from_payload(payload: dict[str, Any], collection: str, *, include_content: bool) -> Chunk | None:
    """None (and a warning) for a point whose payload is not a ChunkPayload."""
    try:
        stored = msgspec.convert(payload, ChunkPayload)
    except msgspec.ValidationError as exc:
        log.warning("point payload unreadable", extra={"fields": {"collection": collection, "error": str(exc)[:200]}})
        return None
    return chunk_from_message(
        stored, _LISTS,
        # Parent expansion: the section around the chunk, for reading; the quote stays the chunk
        # itself, the exact lines a citation points at. A chunk that is its own parent has no
        # parent_content, so its quote is the content.
        content=(stored.parent_content or stored.quote) if include_content else "",
        # The version name users see everywhere (CLI, list_corpora, metrics), not the collection.
        index_version=index_version_of(collection),
    )
