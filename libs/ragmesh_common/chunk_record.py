"""A chunk as the services pass it along: the one declaration of ``ragmesh.v1.Chunk``'s fields.

Every conversion is derived from this dataclass and the protobuf descriptor (``dataclasses.fields``
by name; repeated fields become tuples), never retyped: adding a chunk field touches
``proto/ragmesh/v1/common.proto`` and this file. tests/unit/gateway/test_chunk_record.py fails
while the two disagree. What the public JSON shows of a chunk is the gateway's contract
(``ragmesh_gateway.search.schemas.ArticleChunk``): a field appears there only when added on purpose.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Chunk:
    chunk_id: str
    parent_id: str
    doc_id: str
    corpus: str  # corpus id (library@version unless configured otherwise)
    library: str
    version: str  # the library's version, not the index version
    title: str
    heading_path: tuple[str, ...]
    url: str
    quote: str  # the chunk's exact text, as found at source_lines / page
    content: str = ""  # the parent section when expanded, else empty
    source_path: str = ""  # relative to the corpus root
    line_start: int = 0  # 1-based, inclusive; 0 when the source has pages instead
    line_end: int = 0
    page: int = 0  # 1-based physical page for PDFs, else 0
    tags: tuple[str, ...] = ()
    download_path: str = ""  # gateway path of the original file
    index_version: str = ""  # the collection the chunk was read from


CHUNK_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Chunk))


def chunk_from_message(message: Any, repeated: frozenset[str], **given: Any) -> Chunk:
    """A Chunk from any object with the same attribute names (a protobuf message, a stored
    ChunkPayload); the ``repeated`` ones are copied into tuples, so the record never holds a view of
    the source. ``given`` supplies the fields the source holds in another form or not at all."""
    return Chunk(*[given[name] if name in given else
                   tuple(getattr(message, name)) if name in repeated else getattr(message, name)
                   for name in CHUNK_FIELDS])


def chunk_values(chunk: Chunk) -> dict[str, Any]:
    """The record as keyword arguments, e.g. for ``common_pb2.Chunk(**chunk_values(chunk))``."""
    return {name: getattr(chunk, name) for name in CHUNK_FIELDS}
