"""The indexer's build → validate → promote → rollback pipeline against real PostgreSQL, a real
local Qdrant store and the real CPU runtime."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from qdrant_client import AsyncQdrantClient

from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import alias_name
from ragmesh_common.vectorstore.qdrant import QdrantVectorStore
from ragmesh_indexer.build import BuildOptions, IndexBuilder
from ragmesh_indexer.domain import ChunkingConfig
from ragmesh_indexer.embedding import ChunkEmbedder
from ragmesh_indexer.promotion import Promoter
from ragmesh_indexer.registry import CorpusSpec, VersionState
from ragmesh_indexer.registry.postgres import PostgresIndexRegistry
from ragmesh_indexer.validation import Validator

CORPUS = "quokka@1.0"


class Killed(Exception):
    """Stands in for the process dying at a checkpoint."""


@pytest.fixture
async def parts(tmp_path: Path, pg_url: str, unique_schema, runtime_url: str):
    registry = await PostgresIndexRegistry.open(pg_url, schema=unique_schema("idx"))
    store = QdrantVectorStore(AsyncQdrantClient(path=str(tmp_path / "qdrant")))
    tei = TeiClient(runtime_url)
    embedder = ChunkEmbedder(tei, batch=16)
    options = BuildOptions(chunking=ChunkingConfig(), max_file_bytes=1 << 20, url_base="https://docs.example/")

    def builder(checkpoint=None) -> IndexBuilder:
        kwargs = {"checkpoint": checkpoint} if checkpoint else {}
        return IndexBuilder(registry, store, embedder, options, **kwargs)

    parts = {
        "registry": registry, "store": store, "builder": builder,
        "validator": Validator(registry, store, embedder),
        "promoter": Promoter(registry, store, retire_after=timedelta(hours=1)),
    }
    yield parts
    await tei.close()
    await store.close()
    await registry.close()


def spec(root: Path) -> CorpusSpec:
    return CorpusSpec(id=CORPUS, library="quokka", version="1.0", root=str(root))


async def ship(parts, root: Path, **kw):
    out = await parts["builder"]().build(spec(root), force=False, actor="test", reason="test", **kw)
    if not out.reused_existing:
        passed, gates = await parts["validator"].validate(CORPUS, out.index_version)
        assert passed, [g for g in gates if not g.passed]
        await parts["promoter"].promote(CORPUS, out.index_version, actor="test", reason="test")
    return out


async def served(parts) -> str:
    return (await parts["store"].get_aliases()).get(alias_name(CORPUS), "")


async def test_build_validate_promote_then_noop_and_incremental(parts, corpus_copy: Path) -> None:
    first = await ship(parts, corpus_copy)
    assert first.chunks > 0 and first.embedded == first.chunks and first.reused_vectors == 0
    assert (await parts["registry"].active_version(CORPUS)).index_version == first.index_version
    assert (await served(parts)).endswith(first.index_version)

    again = await parts["builder"]().build(spec(corpus_copy), force=False, actor="t", reason="t")
    assert again.reused_existing and again.index_version == first.index_version

    target = corpus_copy / "guide" / "architecture.md"
    target.write_text(target.read_text() + "\n## Scaling\n\nAdd workers to scale Quokka horizontally.\n")
    changed = await ship(parts, corpus_copy)
    arch_chunks = sum(1 for e in changed.files if e.path.endswith("architecture.md"))
    assert arch_chunks == 1
    points, _ = await parts["store"].scroll(f"rm__quokka-1-0__{changed.index_version}", limit=1000)
    per_file = [p for p in points if p.payload["source_path"] == "guide/architecture.md"]
    # Only the changed file's chunks whose content changed are embedded again; the rest are reused.
    assert 0 < changed.embedded <= len(per_file)
    assert changed.reused_vectors == changed.chunks - changed.embedded
    assert changed.reused_vectors >= first.chunks - len(per_file)


async def test_a_built_index_records_the_identity_of_its_embedder(parts, corpus_copy: Path) -> None:
    from ragmesh_common.embedders.compatibility import MINILM_INT8_ONNX

    out = await ship(parts, corpus_copy)
    info = await parts["store"].get_collection(f"rm__quokka-1-0__{out.index_version}")
    recorded = info.metadata.embedder
    assert recorded == MINILM_INT8_ONNX
    assert (recorded.model, recorded.dtype, recorded.format, recorded.dimension, recorded.normalization) == (
        "all-MiniLM-L6-v2-onnx-int8", "int8", "onnx", 384, "l2")
    assert recorded.revision == "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"


async def test_failed_gate_leaves_alias_alone(parts, corpus_copy: Path) -> None:
    first = await ship(parts, corpus_copy)
    (corpus_copy / "guide" / "install.md").write_text("# Installing Quokka\n\nNew text about installation.\n")
    built = await parts["builder"]().build(spec(corpus_copy), force=False, actor="t", reason="t")
    # The file changes again after the build: its quotes no longer sit at their lines.
    (corpus_copy / "guide" / "install.md").write_text("# Moved\n\n\n\nsomething else entirely\n")
    passed, gates = await parts["validator"].validate(CORPUS, built.index_version)
    assert not passed and any(g.gate == "quotes_at_lines" and not g.passed for g in gates)
    with pytest.raises(RagmeshError) as exc:
        await parts["promoter"].promote(CORPUS, built.index_version, actor="t", reason="t")
    assert exc.value.code == ErrorCode.CONFLICT
    assert (await served(parts)).endswith(first.index_version)


@pytest.mark.parametrize("stage", ["scanned", "chunked", "reuse-resolved", "embedded", "collection-created",
                                   "upserted-batch"])
async def test_build_killed_at_any_stage_never_moves_alias(parts, corpus_copy: Path, stage: str) -> None:
    first = await ship(parts, corpus_copy)
    (corpus_copy / "guide" / "extra.md").write_text("# Extra\n\nA new page about Quokka plugins.\n")

    async def die(at: str) -> None:
        if at == stage:
            raise Killed(at)

    with pytest.raises(Killed):
        await parts["builder"](die).build(spec(corpus_copy), force=False, actor="t", reason="t")
    assert (await served(parts)).endswith(first.index_version)
    assert (await parts["registry"].active_version(CORPUS)).index_version == first.index_version
    rerun = await ship(parts, corpus_copy)
    assert not rerun.reused_existing and (await served(parts)).endswith(rerun.index_version)


async def test_rollback_and_reconcile(parts, corpus_copy: Path) -> None:
    first = await ship(parts, corpus_copy)
    (corpus_copy / "guide" / "extra.md").write_text("# Extra\n\nQuokka supports cron-style schedules.\n")
    second = await ship(parts, corpus_copy)
    same = await parts["promoter"].promote(CORPUS, second.index_version, actor="t", reason="again")
    assert not same.changed
    back = await parts["promoter"].rollback(CORPUS, actor="t", reason="bad release")
    assert back.active == first.index_version and (await served(parts)).endswith(first.index_version)
    # A crash between the registry commit and the alias swap: the alias lags the registry.
    await parts["store"].set_alias(alias_name(CORPUS), f"rm__quokka-1-0__{second.index_version}")
    assert await parts["promoter"].reconcile(CORPUS)
    assert (await served(parts)).endswith(first.index_version)
    versions = {v.index_version: v.state for v in await parts["registry"].list_versions(CORPUS)}
    assert versions[first.index_version] == VersionState.ACTIVE
    assert versions[second.index_version] == VersionState.PREVIOUS
