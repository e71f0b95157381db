"""Which readable corpora one search fans out to.

A corpus the caller may not read is treated exactly like one that does not exist: both give
NOT_FOUND, and neither ever appears in AMBIGUOUS_LIBRARY's choices.
"""

from __future__ import annotations

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_retrieval.domain.catalog import ActiveCorpus
from ragmesh_retrieval.domain.model import SearchInput


def route(
    readable: list[ActiveCorpus], request: SearchInput, max_corpora: int
) -> tuple[list[ActiveCorpus], list[str]]:
    """(corpora to query, corpus ids skipped by the fan-out cap). ``readable`` is sorted by corpus id,
    and the cap keeps the first ones, so the same request always searches the same corpora."""
    candidates = readable
    if request.corpora:
        known = {c.corpus for c in candidates}
        unknown = [c for c in request.corpora if c not in known]
        if unknown:
            raise RagmeshError(ErrorCode.NOT_FOUND, "no such corpus", {"corpora": unknown})
        wanted = set(request.corpora)
        candidates = [c for c in candidates if c.corpus in wanted]
    if request.library:
        library = request.library.casefold()
        matches = [
            c for c in candidates
            if c.library.casefold() == library and (not request.version or c.version == request.version)
        ]
        if not matches:
            raise RagmeshError(
                ErrorCode.NOT_FOUND, "no such library", {"library": request.library, "version": request.version}
            )
        if len(matches) > 1:
            raise RagmeshError(
                ErrorCode.AMBIGUOUS_LIBRARY,
                "the library matches several corpora; name a version or a corpus",
                {"choices": [{"corpus": c.corpus, "library": c.library, "version": c.version} for c in matches]},
            )
        candidates = matches
    elif request.version:
        candidates = [c for c in candidates if c.version == request.version]
        if not candidates:
            raise RagmeshError(ErrorCode.NOT_FOUND, "no corpus has that version", {"version": request.version})
    if not candidates:
        raise RagmeshError(ErrorCode.NO_ACTIVE_INDEX, "no readable corpus has an active index")
    cap = max(1, max_corpora)
    return candidates[:cap], [c.corpus for c in candidates[cap:]]
