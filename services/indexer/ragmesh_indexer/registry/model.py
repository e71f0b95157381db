"""What the index version registry records: corpora, their index versions, and how versions move.

Life of an index version:

* ``candidate`` -> ``validated`` (gates passed) or ``failed``.
* ``validated`` -> ``active`` on promotion; the old ``active`` becomes ``previous`` and the old
  ``previous`` falls back to ``validated`` (superseded: promotable again, or retired later).
* rollback swaps ``active`` and ``previous``.
* ``validated`` or ``failed`` -> ``retired``; only then may its collection be deleted.

Per corpus there is at most one ``active`` and at most one ``previous`` (the rollback target); once a
version has been promoted there is always exactly one ``active``. ``retired`` is terminal.
"""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

import msgspec


class VersionState(enum.StrEnum):
    CANDIDATE = "candidate"  # being built, or built and awaiting validation
    VALIDATED = "validated"  # passed the gates; promotable
    ACTIVE = "active"  # serving queries through the corpus alias
    PREVIOUS = "previous"  # the last active one, kept for rollback
    RETIRED = "retired"  # no longer kept; its collection is (being) deleted
    FAILED = "failed"  # build or validation failed; never promotable


# Which states a version may leave for which, per operation. Promotion and rollback also move the
# versions around the target (active -> previous, previous -> validated); those are allowed here too
# so that every write goes through one check.
ALLOWED_TRANSITIONS: dict[VersionState, frozenset[VersionState]] = {
    VersionState.CANDIDATE: frozenset({VersionState.VALIDATED, VersionState.FAILED}),
    VersionState.VALIDATED: frozenset(
        {VersionState.VALIDATED, VersionState.ACTIVE, VersionState.FAILED, VersionState.RETIRED}
    ),
    VersionState.ACTIVE: frozenset({VersionState.PREVIOUS, VersionState.VALIDATED}),
    VersionState.PREVIOUS: frozenset({VersionState.ACTIVE, VersionState.VALIDATED}),
    VersionState.FAILED: frozenset({VersionState.FAILED, VersionState.RETIRED}),
    VersionState.RETIRED: frozenset(),
}

# States whose collection must exist: a build may reuse them and they must never be deleted.
LIVE_STATES = frozenset(
    {VersionState.CANDIDATE, VersionState.VALIDATED, VersionState.ACTIVE, VersionState.PREVIOUS}
)


class CorpusSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What to index for one corpus: where the files are and how to present them."""

    id: str
    library: str = ""
    version: str = ""
    root: str = ""
    include: list[str] = []
    exclude: list[str] = []
    visibility: str = "public"
    license: str = ""
    source_url: str = ""
    url_base: str = ""
    chunking: str = ""


class Corpus(CorpusSpec, frozen=True, kw_only=True):
    created_at: datetime
    updated_at: datetime


class BuildStats(msgspec.Struct, frozen=True):
    documents: int = 0
    chunks: int = 0
    embedded: int = 0  # chunks embedded by this build
    reused: int = 0  # chunk vectors copied from an earlier version with the same content


class IndexVersion(msgspec.Struct, frozen=True, kw_only=True):
    corpus: str
    index_version: str
    state: VersionState
    content_hash: str
    config_hash: str
    collection: str
    created_at: datetime
    created_by: str
    reason: str
    stats: BuildStats
    validation: dict[str, Any] | None = None
    promoted_at: datetime | None = None  # last time it became active
    retired_at: datetime | None = None


class BuildProgress(msgspec.Struct, frozen=True, kw_only=True):
    corpus: str
    index_version: str
    stage: str
    done: int
    total: int
    updated_at: datetime


class PromotionResult(msgspec.Struct, frozen=True, kw_only=True):
    corpus: str
    active: str
    previous: str | None
    changed: bool  # False when the requested version was already active


class VersionEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One audit record: who moved which version from what state to what, when and why."""

    id: int
    corpus: str
    index_version: str
    from_state: VersionState | None  # None when the version was created
    to_state: VersionState
    actor: str
    reason: str
    at: datetime
