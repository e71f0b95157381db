"""The manifest of each index version: every file the build saw, its hashes, parser, status and chunks.

Stored as one JSON file per version, ``<state dir>/manifests/<corpus>/<index_version>.json``,
rather than in the registry's jsonb: a manifest of a large corpus runs to megabytes, is written
once and read rarely (diff, verify, audits), and is useful to read with ordinary tools. The
file is written before the version's registry row exists (temp file, fsync, rename), so every
registered version has a complete manifest; a manifest whose version never reached the
registry is harmless and says what the interrupted build saw. Manifests outlive retirement:
they are small, and they keep ``diff`` working against versions whose collections are gone.

:func:`diff_manifests` is pure: what changed between two manifests, by raw file hash.
"""

from __future__ import annotations

import abc
import asyncio
import os
import tempfile
from datetime import datetime
from pathlib import Path
from urllib.parse import quote

import msgspec

from ragmesh_common.errors import ErrorCode, RagmeshError

MANIFEST_FORMAT = 1


class ManifestFile(msgspec.Struct, frozen=True, omit_defaults=True):
    path: str
    status: str  # indexed | archived | failed
    size: int
    raw_sha256: str = ""
    canonical_sha256: str = ""
    parser: str = ""
    reason: str = ""  # why archived or failed
    detail: str = ""
    warnings: list[str] = []
    chunks: int = 0


class ManifestCorpus(msgspec.Struct, frozen=True):
    """The corpus as it was described when this version was built."""

    library: str
    version: str
    root: str
    include: list[str]
    exclude: list[str]
    visibility: str
    license: str
    source_url: str


class ManifestTotals(msgspec.Struct, frozen=True):
    files: int
    indexed: int
    archived: int
    failed: int
    documents: int
    chunks: int


class VersionManifest(msgspec.Struct, frozen=True):
    format: int
    corpus_id: str
    index_version: str
    created_at: datetime
    content_hash: str  # the scan's corpus hash: equal hashes, equal content
    config_hash: str
    corpus: ManifestCorpus
    totals: ManifestTotals
    files: list[ManifestFile]

    def by_path(self) -> dict[str, ManifestFile]:
        return {f.path: f for f in self.files}


class FileChange(msgspec.Struct, frozen=True):
    path: str
    change: str  # added | removed | changed
    before: ManifestFile | None
    after: ManifestFile | None


class ManifestDiff(msgspec.Struct, frozen=True):
    changes: list[FileChange]
    unchanged: int


def diff_manifests(before: list[ManifestFile], after: list[ManifestFile], *,
                   compare_chunks: bool = True) -> ManifestDiff:
    """Files added, removed or changed (raw hash, status, or chunk count unless told not to)
    between two file lists."""
    old = {f.path: f for f in before}
    new = {f.path: f for f in after}
    changes: list[FileChange] = []
    unchanged = 0
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a is None:
            changes.append(FileChange(path, "added", None, b))
        elif b is None:
            changes.append(FileChange(path, "removed", a, None))
        elif (a.raw_sha256, a.status) != (b.raw_sha256, b.status) or (compare_chunks and a.chunks != b.chunks):
            changes.append(FileChange(path, "changed", a, b))
        else:
            unchanged += 1
    return ManifestDiff(changes, unchanged)


class ManifestStore(abc.ABC):
    @abc.abstractmethod
    async def save(self, manifest: VersionManifest) -> None: ...

    @abc.abstractmethod
    async def load(self, corpus: str, index_version: str) -> VersionManifest:
        """NOT_FOUND when no manifest was recorded for that version."""


class FileManifestStore(ManifestStore):
    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    def path_of(self, corpus: str, index_version: str) -> Path:
        # Corpus ids carry "@" and may carry "/"; quoting keeps each one a single safe folder name.
        return self.folder / quote(corpus, safe="@._-") / f"{quote(index_version, safe='._-')}.json"

    async def save(self, manifest: VersionManifest) -> None:
        await asyncio.to_thread(self._write, manifest)

    async def load(self, corpus: str, index_version: str) -> VersionManifest:
        return await asyncio.to_thread(self._read, corpus, index_version)

    def _write(self, manifest: VersionManifest) -> None:
        target = self.path_of(manifest.corpus_id, manifest.index_version)
        target.parent.mkdir(parents=True, exist_ok=True)
        data = msgspec.json.format(msgspec.json.encode(manifest), indent=1)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".manifest-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, target)  # readers see the old file or the whole new one, never a part
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def _read(self, corpus: str, index_version: str) -> VersionManifest:
        path = self.path_of(corpus, index_version)
        try:
            return msgspec.json.decode(path.read_bytes(), type=VersionManifest)
        except FileNotFoundError:
            raise RagmeshError(ErrorCode.NOT_FOUND,
                               f"no manifest recorded for {index_version} of {corpus}") from None
        except msgspec.DecodeError:
            raise RagmeshError(ErrorCode.INTERNAL, f"manifest of {index_version} of {corpus} is unreadable") from None


class MemoryManifestStore(ManifestStore):
    """For tests that do not care where manifests go."""

    def __init__(self) -> None:
        self.saved: dict[tuple[str, str], VersionManifest] = {}

    async def save(self, manifest: VersionManifest) -> None:
        self.saved[(manifest.corpus_id, manifest.index_version)] = manifest

    async def load(self, corpus: str, index_version: str) -> VersionManifest:
        try:
            return self.saved[(corpus, index_version)]
        except KeyError:
            raise RagmeshError(ErrorCode.NOT_FOUND,
                               f"no manifest recorded for {index_version} of {corpus}") from None
