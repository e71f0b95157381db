"""Input checks for search and reads. Messages never echo the query text."""

from __future__ import annotations

import re
import unicodedata

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import is_chunk_id
from ragmesh_common.vectorstore.port import normalize_path_prefix

from ragmesh_retrieval.domain.model import SearchInput, SearchLimits

MAX_FILTER_CHARS = 256
MAX_FILTER_ITEMS = 64
MAX_BATCH_IDS = 20
_INDEX_VERSION = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
_ALLOWED_CONTROLS = frozenset("\t\n\r")


def has_control_chars(text: str) -> bool:
    # Cc: C0/C1 controls (NUL, ESC, ...); Cs: lone surrogates. Tabs and newlines are ordinary text.
    return any(
        unicodedata.category(ch) in ("Cc", "Cs") and ch not in _ALLOWED_CONTROLS for ch in text
    )


def validated_query(text: str, limits: SearchLimits) -> str:
    query = text.strip()
    if not query:
        raise RagmeshError(ErrorCode.QUERY_EMPTY, "the query is empty")
    if len(query) > limits.max_query_chars:
        raise RagmeshError(
            ErrorCode.QUERY_TOO_LONG,
            f"the query is longer than {limits.max_query_chars} characters",
            {"max_chars": limits.max_query_chars, "chars": len(query)},
        )
    if has_control_chars(query):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "the query contains control characters")
    return query


def clamped_top_k(top_k: int, limits: SearchLimits) -> tuple[int, bool]:
    """(top_k to use, whether it was cut to the cap)."""
    if top_k < 1:
        raise RagmeshError(
            ErrorCode.TOP_K_OUT_OF_RANGE,
            f"top_k must be between 1 and {limits.max_top_k}",
            {"min": 1, "max": limits.max_top_k},
        )
    if top_k > limits.max_top_k:
        return limits.max_top_k, True
    return top_k, False


def validated_filters(request: SearchInput) -> SearchInput:
    """The request with filter strings checked and the path prefix normalised."""
    for name, value in (("library", request.library), ("version", request.version),
                        ("path_prefix", request.path_prefix)):
        _check_filter_text(name, value)
    for name, values in (("tags", request.tags), ("corpora", request.corpora)):
        if len(values) > MAX_FILTER_ITEMS:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"at most {MAX_FILTER_ITEMS} {name} per filter")
        for value in values:
            _check_filter_text(name, value)
    return SearchInput(
        query=request.query,
        top_k=request.top_k,
        readable_corpora=request.readable_corpora,
        corpora=tuple(dict.fromkeys(c.strip() for c in request.corpora if c.strip())),
        library=request.library.strip(),
        version=request.version.strip(),
        tags=tuple(dict.fromkeys(t.strip() for t in request.tags if t.strip())),
        path_prefix=normalize_path_prefix(request.path_prefix),
        include_content=request.include_content,
    )


def _check_filter_text(name: str, value: str) -> None:
    if len(value) > MAX_FILTER_CHARS:
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"filter {name} is longer than {MAX_FILTER_CHARS} characters")
    if has_control_chars(value):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"filter {name} contains control characters")


def validated_chunk_ids(chunk_ids: list[str]) -> list[str]:
    """Canonical (lower-case) ids, duplicates dropped, order kept."""
    if len(chunk_ids) > MAX_BATCH_IDS:
        raise RagmeshError(
            ErrorCode.TOO_MANY_IDS, f"at most {MAX_BATCH_IDS} chunk ids per request",
            {"max": MAX_BATCH_IDS, "given": len(chunk_ids)},
        )
    canonical: list[str] = []
    for raw in chunk_ids:
        value = raw.strip().lower()
        if not is_chunk_id(value):
            raise RagmeshError(
                ErrorCode.MALFORMED_CHUNK_ID, "a chunk id is not a UUID", {"chunk_id": raw[:64]}
            )
        canonical.append(value)
    return list(dict.fromkeys(canonical))


def validated_index_version(value: str) -> str:
    value = value.strip()
    if value and not _INDEX_VERSION.match(value):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "index_version is malformed")
    return value
