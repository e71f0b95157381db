"""The indexer as the gateway sees it: build, promote, roll back, report status, remove a corpus."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class CorpusSpec:
    corpus: str
    root: str = ""  # empty: the registered root
    library: str = ""
    version: str = ""
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    visibility: str = ""  # empty: the registered one (internal for a new corpus)
    license: str = ""
    source_url: str = ""
    url_base: str = ""
    chunking: str = ""


@dataclass(frozen=True, slots=True)
class FileReport:
    path: str
    status: str
    reason: str = ""
    parser: str = ""
    chunks: int = 0


@dataclass(frozen=True, slots=True)
class BuildResult:
    index_version: str
    reused_existing: bool = False
    documents: int = 0
    chunks: int = 0
    embedded: int = 0
    reused_vectors: int = 0
    state: str = ""
    files: list[FileReport] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class PromoteResult:
    corpus: str
    active_version: str
    previous_version: str = ""
    changed: bool = False


@dataclass(frozen=True, slots=True)
class VersionInfo:
    index_version: str
    state: str
    created_at: str = ""
    actor: str = ""
    reason: str = ""
    chunks: int = 0
    documents: int = 0


@dataclass(frozen=True, slots=True)
class BuildProgress:
    index_version: str
    stage: str
    done: int = 0
    total: int = 0


@dataclass(frozen=True, slots=True)
class IndexStatus:
    corpus: str
    active_version: str = ""
    versions: list[VersionInfo] = field(default_factory=list)
    in_progress: list[BuildProgress] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RemovedVersion:
    index_version: str
    state: str
    collection: str
    chunks: int = 0
    collection_exists: bool = False


@dataclass(frozen=True, slots=True)
class RemoveResult:
    corpus: str
    dry_run: bool
    alias: str
    alias_existed: bool = False
    versions: list[RemovedVersion] = field(default_factory=list)
    collections_deleted: list[str] = field(default_factory=list)


class IndexAdmin(abc.ABC):
    @abc.abstractmethod
    async def build(self, spec: CorpusSpec, *, force: bool, actor: str, reason: str,
                    admin: bool) -> BuildResult:
        """``admin``: the caller may register a new root, change root or visibility, publish."""

    @abc.abstractmethod
    async def promote(self, corpus: str, index_version: str, *, actor: str, reason: str) -> PromoteResult: ...

    @abc.abstractmethod
    async def rollback(self, corpus: str, *, actor: str, reason: str) -> PromoteResult: ...

    @abc.abstractmethod
    async def status(self, corpus: str) -> IndexStatus: ...

    @abc.abstractmethod
    async def remove(self, corpus: str, *, dry_run: bool, actor: str, reason: str) -> RemoveResult: ...
