"""Stable identifiers.

``doc_id`` depends only on (corpus, path); ``parent_id`` and ``chunk_id`` on their document and
their content, never on line numbers, so an edit elsewhere in a file keeps the ids (and the stored
vectors) of untouched chunks. Ids are RFC 4122 UUID strings: valid Qdrant point ids, and anything
that does not parse as one is a malformed id rather than an unknown one.
"""

from __future__ import annotations

import hashlib
import uuid

from ragmesh_common.errors import ErrorCode, RagmeshError

# Fixed namespaces: changing one would re-key every stored point.
_DOC_NS = uuid.uuid5(uuid.NAMESPACE_URL, "https://ragmesh.invalid/ns/document")
_PARENT_NS = uuid.uuid5(uuid.NAMESPACE_URL, "https://ragmesh.invalid/ns/parent")
_CHUNK_NS = uuid.uuid5(uuid.NAMESPACE_URL, "https://ragmesh.invalid/ns/chunk")


def _digest(*parts: str) -> str:
    # NUL separators keep ("ab", "c") and ("a", "bc") apart.
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


def doc_id(corpus: str, path: str) -> str:
    return str(uuid.uuid5(_DOC_NS, f"{corpus}\x00{path}"))


def parent_id(doc: str, heading_path: list[str], content: str, occurrence: int = 0) -> str:
    """``occurrence`` counts earlier sections of the same document with identical key, so two
    identical sections never share an id."""
    return str(uuid.uuid5(_PARENT_NS, _digest(doc, "\x1f".join(heading_path), content, str(occurrence))))


def chunk_id(doc: str, strategy: str, content: str, occurrence: int = 0) -> str:
    return str(uuid.uuid5(_CHUNK_NS, _digest(doc, strategy, content, str(occurrence))))


def is_uuid_id(value: object) -> bool:
    """True for a canonical (lower-case, hyphenated) UUID string."""
    if not isinstance(value, str):
        return False
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


def require_chunk_id(value: object) -> str:
    if not is_uuid_id(value):
        raise RagmeshError(ErrorCode.MALFORMED_CHUNK_ID, "chunk id must be a canonical UUID string")
    return value  # type: ignore[return-value]
