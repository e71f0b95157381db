"""Version manifests: what diff calls added, removed and changed, and how manifests are stored."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_indexer.manifests import (
    FileManifestStore,
    ManifestCorpus,
    ManifestFile,
    ManifestTotals,
    VersionManifest,
    diff_manifests,
)


def f(path: str, sha: str = "a", status: str = "indexed", chunks: int = 1) -> ManifestFile:
    return ManifestFile(path=path, status=status, size=1, raw_sha256=sha, chunks=chunks)


def manifest(corpus: str, version: str, files: list[ManifestFile]) -> VersionManifest:
    return VersionManifest(
        format=1, corpus_id=corpus, index_version=version, created_at=datetime.now(timezone.utc),
        content_hash="c", config_hash="k",
        corpus=ManifestCorpus(library="lib", version="1", root="/r", include=["**"], exclude=[],
                              visibility="public", license="MIT", source_url="https://x"),
        totals=ManifestTotals(files=len(files), indexed=len(files), archived=0, failed=0, documents=len(files),
                              chunks=sum(x.chunks for x in files)),
        files=files,
    )


def test_diff_names_added_removed_and_changed_files() -> None:
    before = [f("same.md"), f("edited.md", "a"), f("gone.md"), f("rechunked.md", chunks=1), f("now-bad.md")]
    after = [f("same.md"), f("edited.md", "b"), f("new.md"), f("rechunked.md", chunks=3),
             f("now-bad.md", status="archived", chunks=0)]
    found = diff_manifests(before, after)
    assert [(c.path, c.change) for c in found.changes] == [
        ("edited.md", "changed"), ("gone.md", "removed"), ("new.md", "added"), ("now-bad.md", "changed"),
        ("rechunked.md", "changed")]
    assert found.unchanged == 1
    added = next(c for c in found.changes if c.change == "added")
    assert added.before is None and added.after.path == "new.md"


def test_diff_without_chunk_counts_compares_content_and_status_only() -> None:
    found = diff_manifests([f("a.md", chunks=4)], [f("a.md", chunks=0)], compare_chunks=False)
    assert found.changes == [] and found.unchanged == 1


def test_store_round_trips_one_file_per_version(tmp_path: Path) -> None:
    import asyncio

    store = FileManifestStore(tmp_path / "manifests")
    saved = manifest("lib@1.0", "v1", [f("a.md"), f("b/c.md", "z", chunks=2)])
    asyncio.run(store.save(saved))
    path = tmp_path / "manifests" / "lib@1.0" / "v1.json"
    assert store.path_of("lib@1.0", "v1") == path and path.is_file()
    assert asyncio.run(store.load("lib@1.0", "v1")) == saved
    assert [p.name for p in path.parent.iterdir()] == ["v1.json"]  # no temp file left behind
    # A corpus id never escapes its folder.
    assert store.path_of("../evil/x", "v1").parent.parent == tmp_path / "manifests"


def test_missing_manifest_is_not_found(tmp_path: Path) -> None:
    import asyncio

    with pytest.raises(RagmeshError) as exc:
        asyncio.run(FileManifestStore(tmp_path).load("lib@1.0", "v9"))
    assert exc.value.code == ErrorCode.NOT_FOUND
