"""Several corpora side by side, per-version manifests, diff, verify and dry runs — the indexer's
application services against real PostgreSQL, a local Qdrant store and the CPU runtime."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import alias_name, collection_name
from ragmesh_indexer.registry import CorpusSpec, VersionState

ROOT = Path(__file__).resolve().parents[3]
V1, V2 = "quokka@1.0", "quokka@2.0"


def copy_corpus(tmp_path: Path, name: str) -> Path:
    dest = tmp_path / name
    shutil.copytree(ROOT / "tests" / "fixtures" / "e2e_corpus", dest)
    return dest


def spec(corpus: str, root: Path) -> CorpusSpec:
    library, version = corpus.split("@")
    return CorpusSpec(id=corpus, library=library, version=version, root=str(root), license="MIT",
                      source_url=f"https://example.org/{library}")


async def ship(indexer, corpus: str, root: Path) -> str:
    out = await indexer.builder.build(spec(corpus, root), force=False, actor="test", reason="test")
    passed, gates = await indexer.validator.validate(corpus, out.index_version)
    assert passed, [g for g in gates if not g.passed]
    await indexer.promoter.promote(corpus, out.index_version, actor="test", reason="test")
    return out.index_version


async def serving(indexer) -> dict[str, str]:
    """corpus -> the index version its alias serves."""
    aliases = await indexer.store.get_aliases()
    return {c: aliases.get(alias_name(c), "").rsplit("__", 1)[-1] for c in (V1, V2)}


async def active(indexer, corpus: str) -> str:
    version = await indexer.registry.active_version(corpus)
    return version.index_version if version else ""


async def test_corpora_side_by_side_each_move_their_own_alias(indexer, tmp_path: Path) -> None:
    one, two = copy_corpus(tmp_path, "one"), copy_corpus(tmp_path, "two")
    a1 = await ship(indexer, V1, one)
    b1 = await ship(indexer, V2, two)
    assert await serving(indexer) == {V1: a1, V2: b1}

    (one / "guide" / "extra.md").write_text("# Extra\n\nQuokka 1.0 retries failed jobs twice.\n")
    a2 = await ship(indexer, V1, one)
    assert await serving(indexer) == {V1: a2, V2: b1}
    b_states = {v.index_version: v.state for v in await indexer.registry.list_versions(V2)}

    back = await indexer.promoter.rollback(V1, actor="test", reason="bad release")
    assert back.active == a1
    assert await serving(indexer) == {V1: a1, V2: b1}
    assert (await active(indexer, V1), await active(indexer, V2)) == (a1, b1)
    # The other corpus's versions did not move at all.
    assert {v.index_version: v.state for v in await indexer.registry.list_versions(V2)} == b_states

    (two / "guide" / "extra.md").write_text("# Extra\n\nQuokka 2.0 retries failed jobs five times.\n")
    b2 = await ship(indexer, V2, two)
    assert await serving(indexer) == {V1: a1, V2: b2}
    await indexer.promoter.rollback(V2, actor="test", reason="test")
    assert await serving(indexer) == {V1: a1, V2: b1}
    # Rolling one corpus back and forth never touched the other's collections.
    for version in (a1, a2):
        assert (await indexer.store.get_collection(collection_name(V1, version))).exists


async def test_each_version_has_a_manifest_and_diff_compares_them(indexer, tmp_path: Path) -> None:
    root = copy_corpus(tmp_path, "one")
    first = await ship(indexer, V1, root)
    path = indexer.manifests.path_of(V1, first)
    assert path == tmp_path / "manifests" / V1 / f"{first}.json"
    recorded = json.loads(path.read_text())
    files = {f["path"]: f for f in recorded["files"]}
    assert set(files) == {"guide/install.md", "guide/architecture.md"}
    install = (root / "guide" / "install.md").read_bytes()
    import hashlib

    assert files["guide/install.md"]["raw_sha256"] == hashlib.sha256(install).hexdigest()
    assert files["guide/install.md"]["size"] == len(install)
    assert files["guide/install.md"]["parser"] == "markdown" and files["guide/install.md"]["status"] == "indexed"
    stats = (await indexer.registry.get_version(V1, first)).stats
    assert sum(f["chunks"] for f in files.values()) == recorded["totals"]["chunks"] == stats.chunks
    assert recorded["corpus"]["license"] == "MIT"

    (root / "guide" / "extra.md").write_text("# Extra\n\nA new page.\n\n## More\n\nAnother section here.\n")
    arch = root / "guide" / "architecture.md"
    arch.write_text(arch.read_text() + "\n## Scaling\n\nAdd workers to scale out.\n")
    (root / "guide" / "install.md").unlink()
    (root / "notes.bin").write_bytes(b"\x00\x01binary")
    second = await ship(indexer, V1, root)

    found = await indexer.inspector.diff(V1, first, second)
    changes = {c.path: c for c in found.diff.changes}
    assert {p: c.change for p, c in changes.items()} == {
        "guide/extra.md": "added", "guide/architecture.md": "changed", "guide/install.md": "removed",
        "notes.bin": "added"}
    assert changes["notes.bin"].after.status == "archived" and changes["notes.bin"].after.reason == "binary"
    assert changes["guide/architecture.md"].after.chunks >= changes["guide/architecture.md"].before.chunks
    assert found.diff.unchanged == 0
    assert (found.before.totals.chunks, found.after.totals.chunks) == (
        stats.chunks, (await indexer.registry.get_version(V1, second)).stats.chunks)
    # Defaults: from the active version to the newest other one.
    default = await indexer.inspector.diff(V1)
    assert (default.before.index_version, default.after.index_version) == (second, first)
    with pytest.raises(RagmeshError) as exc:
        await indexer.inspector.diff(V1, first, "v-never-built")
    assert exc.value.code == ErrorCode.NOT_FOUND


async def test_verify_reports_drift_against_the_active_manifest(indexer, tmp_path: Path) -> None:
    root = copy_corpus(tmp_path, "one")
    version = await ship(indexer, V1, root)
    clean = await indexer.inspector.verify(V1)
    assert clean.ok and clean.index_version == version and clean.checked == 2

    (root / "guide" / "install.md").write_text("# Installing\n\nChanged on disk after the build.\n")
    (root / "guide" / "architecture.md").unlink()
    (root / "guide" / "new.md").write_text("# New\n\nNot in the index yet.\n")
    drift = await indexer.inspector.verify(V1)
    assert not drift.ok
    assert {c.path: c.change for c in drift.diff.changes} == {
        "guide/install.md": "changed", "guide/architecture.md": "removed", "guide/new.md": "added"}
    with pytest.raises(RagmeshError) as exc:
        await indexer.inspector.verify(V2)
    assert exc.value.code == ErrorCode.NOT_FOUND


async def test_dry_run_reports_everything_and_writes_nothing(indexer, tmp_path: Path) -> None:
    root = copy_corpus(tmp_path, "one")
    out = await indexer.builder.build(spec(V1, root), force=False, actor="t", reason="t", dry_run=True)
    assert out.dry_run and out.index_version == "" and out.state == "dry-run"
    assert out.chunks > 0 and {f.path for f in out.files} == {"guide/install.md", "guide/architecture.md"}
    assert all(f.chunks > 0 for f in out.files)
    assert await indexer.registry.list_corpora() == []
    assert await indexer.store.list_collections() == []
    assert not (tmp_path / "manifests").exists()
    # The real build afterwards reports the same files and chunk counts.
    built = await indexer.builder.build(spec(V1, root), force=False, actor="t", reason="t")
    assert [(f.path, f.chunks) for f in built.files] == [(f.path, f.chunks) for f in out.files]
    assert (await indexer.registry.get_version(V1, built.index_version)).state == VersionState.CANDIDATE


async def test_a_rebuild_keeps_the_registered_fields_it_does_not_repeat(indexer, tmp_path: Path) -> None:
    root = copy_corpus(tmp_path, "one")
    first = await indexer.builder.build(
        CorpusSpec(id=V1, library="quokka", version="1.0", root=str(root), visibility="internal",
                   license="MIT", source_url="https://example.org/quokka"), force=False, actor="t", reason="t")
    again = await indexer.builder.build(CorpusSpec(id=V1, root=str(root), visibility=""), force=False,
                                        actor="t", reason="t")
    assert again.reused_existing and again.index_version == first.index_version
    registered = await indexer.registry.get_corpus(V1)
    assert (registered.visibility, registered.license, registered.library) == ("internal", "MIT", "quokka")


async def test_status_shows_the_running_build_from_its_first_file(indexer, tmp_path: Path) -> None:
    from ragmesh.v1 import indexer_pb2

    from ragmesh_indexer.build import IndexBuilder
    from ragmesh_indexer.servicer import IndexerServicer

    root = copy_corpus(tmp_path, "one")
    seen: dict[str, list] = {}
    servicer: IndexerServicer

    async def look(stage: str) -> None:
        if stage in ("parsed-file", "embed-batch", "built") and stage not in seen:
            reply = await servicer.Status(indexer_pb2.StatusRequest(corpus=V1), None)
            seen[stage] = [(p.index_version, p.stage, p.done, p.total) for p in reply.in_progress]

    builder = IndexBuilder(indexer.registry, indexer.store, indexer.builder.embedder, indexer.options,
                           manifests=indexer.manifests, checkpoint=look)
    servicer = IndexerServicer(indexer.registry, builder, indexer.validator, indexer.promoter, indexer.inspector)
    reply = await servicer.Build(indexer_pb2.BuildRequest(corpus=indexer_pb2.CorpusSpec(
        corpus=V1, root=str(root)), actor="t", admin=True), None)

    assert seen["parsed-file"] == [("", "scan", 1, 2)]  # no version yet
    ((version, stage, done, total),) = seen["embed-batch"]
    assert (version, stage) == (reply.index_version, "embed") and 0 < done <= total == reply.chunks
    assert seen["built"] == [(reply.index_version, "built", reply.chunks, reply.chunks)]
    after = await servicer.Status(indexer_pb2.StatusRequest(corpus=V1), None)
    assert list(after.in_progress) == []  # finished: awaiting validation, no longer in progress
    assert [f.chunks > 0 for f in reply.files] == [True, True]


class Killed(Exception):
    pass


async def test_removing_a_corpus_leaves_the_others_and_a_removal_cut_short_completes_at_start(
    indexer, tmp_path: Path
) -> None:
    from ragmesh_indexer.removal import CorpusRemover

    one, two = copy_corpus(tmp_path, "one"), copy_corpus(tmp_path, "two")
    a1 = await ship(indexer, V1, one)
    b1 = await ship(indexer, V2, two)
    (one / "guide" / "extra.md").write_text("# Extra\n\nQuokka 1.0 retries failed jobs twice.\n")
    a2 = await ship(indexer, V1, one)

    plan = await CorpusRemover(indexer.registry, indexer.store).remove(V1, actor="t", reason="", dry_run=True)
    assert [(v.index_version, v.state) for v in plan.versions] == [(a2, "active"), (a1, "previous")]
    assert plan.alias == alias_name(V1) and plan.alias_existed and all(v.collection_exists for v in plan.versions)
    assert plan.collections_deleted == [] and await serving(indexer) == {V1: a2, V2: b1}

    async def die(name: str) -> None:
        if name == "remove-committed":
            raise Killed(name)

    with pytest.raises(Killed):  # the process dies between the registry commit and the deletions
        await CorpusRemover(indexer.registry, indexer.store, checkpoint=die).remove(
            V1, actor="t", reason="mistake", dry_run=False)
    with pytest.raises(RagmeshError) as unknown:
        await indexer.registry.get_corpus(V1)
    assert unknown.value.code is ErrorCode.NOT_FOUND
    assert (await serving(indexer))[V1] == a2  # still served until the restart completes the removal

    await CorpusRemover(indexer.registry, indexer.store).sweep()  # what the restarted indexer does first
    assert await serving(indexer) == {V1: "", V2: b1}
    for version in (a1, a2):
        assert not (await indexer.store.get_collection(collection_name(V1, version))).exists
    assert (await indexer.store.get_collection(collection_name(V2, b1))).exists
    with pytest.raises(RagmeshError) as again:
        await CorpusRemover(indexer.registry, indexer.store).remove(V1, actor="t", reason="", dry_run=True)
    assert again.value.code is ErrorCode.NOT_FOUND
