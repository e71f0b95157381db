"""Reading versions back: what changed between two of them, and whether the files on disk still
match what the active version was built from. Both work from the manifests; neither writes."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_indexer.corpus_roots import CorpusRootPolicy
from ragmesh_indexer.domain import ScanConfig, scan_corpus
from ragmesh_indexer.manifests import ManifestDiff, ManifestFile, ManifestStore, VersionManifest, diff_manifests
from ragmesh_indexer.registry import IndexRegistry, VersionState


@dataclass
class VersionDiff:
    before: VersionManifest
    after: VersionManifest
    diff: ManifestDiff


@dataclass
class Verification:
    index_version: str
    checked: int
    diff: ManifestDiff  # before = the manifest, after = the disk

    @property
    def ok(self) -> bool:
        return not self.diff.changes


class CorpusInspector:
    def __init__(self, registry: IndexRegistry, manifests: ManifestStore, *, max_file_bytes: int,
                 roots: CorpusRootPolicy | None = None) -> None:
        self.registry = registry
        self.manifests = manifests
        self.max_file_bytes = max_file_bytes
        self.roots = roots or CorpusRootPolicy()

    async def diff(self, corpus: str, from_version: str = "", to_version: str = "") -> VersionDiff:
        """``from_version`` defaults to the active version; ``to_version`` to the newest version
        (not retired) other than ``from_version``."""
        versions = await self.registry.list_versions(corpus)  # newest first
        if not from_version:
            active = next((v for v in versions if v.state == VersionState.ACTIVE), None)
            if active is None:
                raise RagmeshError(ErrorCode.INVALID_ARGUMENT,
                                   f"corpus {corpus} has no active version; name the versions to compare")
            from_version = active.index_version
        if not to_version:
            newer = next((v for v in versions
                          if v.index_version != from_version and v.state != VersionState.RETIRED), None)
            if newer is None:
                raise RagmeshError(ErrorCode.NOT_FOUND, f"corpus {corpus} has no other version to compare with")
            to_version = newer.index_version
        for name in (from_version, to_version):
            await self.registry.get_version(corpus, name)  # NOT_FOUND for a version that never existed
        before = await self.manifests.load(corpus, from_version)
        after = await self.manifests.load(corpus, to_version)
        return VersionDiff(before, after, diff_manifests(before.files, after.files))

    async def verify(self, corpus: str) -> Verification:
        active = await self.registry.active_version(corpus)
        if active is None:
            await self.registry.get_corpus(corpus)  # NOT_FOUND for an unknown corpus
            raise RagmeshError(ErrorCode.NO_ACTIVE_INDEX, f"corpus {corpus} has no active version to verify")
        manifest = await self.manifests.load(corpus, active.index_version)
        recorded = manifest.corpus
        root = Path(recorded.root)
        if not root.is_dir():
            raise RagmeshError(ErrorCode.NOT_FOUND, f"the source folder of {corpus} is gone")
        # Reads only where a build of it may read now (the allow-list may have narrowed since).
        root = Path(self.roots.resolve(recorded.root, registered=[recorded.root], admin=True))
        config = ScanConfig(include=list(recorded.include) or ["**"], exclude=list(recorded.exclude),
                            max_file_bytes=self.max_file_bytes)
        scan = await asyncio.to_thread(scan_corpus, root, config)
        on_disk = [ManifestFile(path=e.path, status=e.status, size=e.size, raw_sha256=e.raw_sha256,
                                canonical_sha256=e.canonical_sha256, parser=e.parser, reason=e.reason)
                   for e in scan.manifest.entries]
        return Verification(active.index_version, len(on_disk),
                            diff_manifests(manifest.files, on_disk, compare_chunks=False))
