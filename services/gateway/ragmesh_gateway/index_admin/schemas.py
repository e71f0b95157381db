"""HTTP contract of the internal index routes (build, promote, rollback, status, remove)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta

CorpusId = Annotated[str, Meta(min_length=1, max_length=200, pattern=r"^[^\x00-\x1f\x7f/\\]+$")]
Reason = Annotated[str, Meta(max_length=500, description="Recorded in the index audit trail.")]


class BuildRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Build a new index version of one corpus (it becomes a candidate; promote it to serve it).

    The indexer reads only under its allowed roots (RAGMESH_CORPUS_ROOTS, else the roots of the
    registered corpora). Registering a root outside them, changing an existing corpus's root or
    visibility, and making a new corpus public need rag:admin (403 otherwise)."""

    corpus: CorpusId
    root: Annotated[str, Meta(description="Absolute folder holding the corpus, as the indexer sees it; "
                                          "empty: the registered root.")] = ""
    library: str = ""
    version: str = ""
    include: list[str] = []
    exclude: list[str] = []
    visibility: Annotated[
        Literal["public", "internal", ""],
        Meta(description="Empty: the registered one, or internal for a new corpus."),
    ] = ""
    license: str = ""
    source_url: str = ""
    url_base: str = ""
    chunking: str = ""
    force: Annotated[bool, Meta(description="Rebuild even when content and config are unchanged.")] = False
    reason: Reason = ""


class FileReportView(msgspec.Struct, kw_only=True):
    path: str
    status: Annotated[str, Meta(description="indexed, archived or failed.")]
    reason: str
    parser: str
    chunks: int


class BuildResponse(msgspec.Struct, kw_only=True):
    request_id: str
    index_version: str
    reused_existing: bool
    documents: int
    chunks: int
    embedded: int
    reused_vectors: int
    state: str
    files: list[FileReportView]


class PromoteRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    corpus: CorpusId
    index_version: Annotated[str, Meta(min_length=1, max_length=200)]
    reason: Reason = ""


class RollbackRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    corpus: CorpusId
    reason: Reason = ""


class PromoteResponse(msgspec.Struct, kw_only=True):
    request_id: str
    corpus: str
    active_version: str
    previous_version: str
    changed: bool


class VersionView(msgspec.Struct, kw_only=True):
    index_version: str
    state: Annotated[str, Meta(description="candidate, validated, active, previous, retired or failed.")]
    created_at: str
    actor: str
    reason: str
    chunks: int
    documents: int


class BuildProgressView(msgspec.Struct, kw_only=True):
    index_version: str
    stage: str
    done: int
    total: int


class IndexStatusResponse(msgspec.Struct, kw_only=True):
    request_id: str
    corpus: str
    active_version: str | None
    versions: list[VersionView]
    in_progress: list[BuildProgressView]


class RemoveRequest(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Take a corpus out of service for good: every index version retired, its alias and collections
    deleted. Needs rag:admin. Building the corpus again later starts afresh."""

    corpus: CorpusId
    dry_run: Annotated[bool, Meta(description="Only say what would be removed; change nothing.")] = False
    reason: Reason = ""


class RemovedVersionView(msgspec.Struct, kw_only=True):
    index_version: str
    state: Annotated[str, Meta(description="Its state before the removal.")]
    collection: str
    chunks: int
    collection_exists: bool


class RemoveResponse(msgspec.Struct, kw_only=True):
    request_id: str
    corpus: str
    dry_run: bool
    alias: str
    alias_existed: bool
    versions: list[RemovedVersionView]
    collections_deleted: Annotated[list[str], Meta(description="Empty on a dry run.")]
