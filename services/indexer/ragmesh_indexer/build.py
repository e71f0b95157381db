"""Building a candidate index version: scan → parse → chunk → manifest → embed → write a new collection.

A build never touches what the alias serves: it writes a brand-new collection, and only promotion
moves the alias. Builds are idempotent by (content hash, config hash), and incremental: a chunk id
is derived from its content, so a chunk found with the same id in the active collection (same
embedding model) reuses its stored vector instead of being embedded again.

Order of durable effects, each after the previous one is complete: the manifest file, the
candidate's registry row, the collection and its points, the candidate's stats. A build that dies
anywhere leaves a candidate without stats (failed by :meth:`IndexBuilder.recover_interrupted` on the
next start) or nothing at all; the alias is never involved.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from ragmesh_common.embedders.identity import EmbedderIdentity
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.index_schema import collection_name
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.vectorstore.port import VectorStorePort
from ragmesh_indexer import metrics
from ragmesh_indexer.checkpoints import Checkpoint, no_checkpoint
from ragmesh_indexer.corpus_roots import CorpusRootPolicy
from ragmesh_indexer.domain import (
    Article,
    ChunkingConfig,
    FileStatus,
    ScanConfig,
    ScanResult,
    UrlScheme,
    chunk_document,
    require_all_indexable,
    scan_corpus,
)
from ragmesh_indexer.embedding import ChunkEmbedder
from ragmesh_indexer.manifests import (
    MANIFEST_FORMAT,
    ManifestCorpus,
    ManifestFile,
    ManifestStore,
    ManifestTotals,
    MemoryManifestStore,
    VersionManifest,
)
from ragmesh_indexer.progress import BuildTracker
from ragmesh_indexer.registry import CorpusSpec, IndexRegistry, VersionState
from ragmesh_indexer.writing import CollectionWriter, embedding_text, lexical_text, payload_for

__all__ = ["BuildOptions", "BuildOutcome", "BuildPlan", "IndexBuilder", "embedding_text", "lexical_text",
           "payload_for"]

log = logging.getLogger("ragmesh.indexer.build")


@dataclass
class BuildOutcome:
    index_version: str  # "" for a dry run
    reused_existing: bool
    documents: int
    chunks: int
    embedded: int
    reused_vectors: int
    state: str  # the version's state, or "dry-run"
    content_hash: str = ""
    dry_run: bool = False
    files: list[ManifestFile] = field(default_factory=list)


@dataclass
class BuildOptions:
    chunking: ChunkingConfig
    max_file_bytes: int
    url_base: str
    upsert_batch: int = 256


@dataclass
class BuildPlan:
    """What a build will write: the scan, the chunked documents and the per-file report."""

    spec: CorpusSpec
    scan: ScanResult
    articles: list[Article]
    chunking: ChunkingConfig
    files: list[ManifestFile]

    @property
    def chunks(self) -> int:
        return sum(len(a.chunks) for a in self.articles)

    @property
    def content_hash(self) -> str:
        return self.scan.manifest.corpus_sha256


class IndexBuilder:
    """``manifests`` defaults to an in-memory store, for tests that do not look at manifests."""

    def __init__(self, registry: IndexRegistry, store: VectorStorePort, embedder: ChunkEmbedder,
                 options: BuildOptions, *, manifests: ManifestStore | None = None,
                 checkpoint: Checkpoint = no_checkpoint, tracker: BuildTracker | None = None,
                 roots: CorpusRootPolicy | None = None) -> None:
        self.registry = registry
        self.store = store
        self.embedder = embedder
        self.options = options
        self.manifests = manifests or MemoryManifestStore()
        self.checkpoint = checkpoint
        self.tracker = tracker or BuildTracker(registry)
        self.roots = roots or CorpusRootPolicy()
        self.lexical = LexicalEncoder()

    async def build(self, spec: CorpusSpec, *, force: bool, actor: str, reason: str,
                    dry_run: bool = False, admin: bool = True) -> BuildOutcome:
        """Build a candidate; with ``dry_run`` only scan, parse, chunk and report, writing nothing.

        ``admin``: the caller may register a new root, change a corpus's root or visibility and make
        a new corpus public (corpus_roots.py); in-process callers are, gRPC callers say so."""
        spec = await self._resolve_spec(spec, record=not dry_run, admin=admin)
        self.tracker.begin(spec.id)
        started = time.perf_counter()
        outcome = "failed"
        try:
            plan = await self.plan(spec)
            if dry_run:
                return BuildOutcome("", False, len(plan.articles), plan.chunks, 0, 0, "dry-run",
                                    plan.content_hash, True, plan.files)
            built = await self._build(plan, force=force, actor=actor, reason=reason)
            outcome = "reused" if built.reused_existing else "built"
            return built
        except asyncio.CancelledError:
            outcome = "cancelled"
            raise
        finally:
            self.tracker.end(spec.id)
            # A dry run writes nothing and is no build; a failed request before this point (an
            # unknown corpus, a refused root) is the caller's mistake, not a failed build.
            if not dry_run:
                metrics.track_corpus(spec.id)
                metrics.observe_build(spec.id, outcome, time.perf_counter() - started)

    async def plan(self, spec: CorpusSpec) -> BuildPlan:
        """Scan, parse and chunk; BUILD_FAILED naming every file that should be indexable but
        yields no text or no chunk."""
        started = time.perf_counter()
        scan = await asyncio.to_thread(
            scan_corpus, Path(spec.root),
            ScanConfig(include=list(spec.include) or ["**"], exclude=list(spec.exclude),
                       max_file_bytes=self.options.max_file_bytes),
            on_file=self._file_hook(spec.id),
        )
        await self.checkpoint("scanned")
        require_all_indexable(scan)
        scanned_s = time.perf_counter() - started
        chunking = self._chunking(spec)
        urls = UrlScheme(base=spec.url_base or self.options.url_base)
        def chunk_all() -> list[Article]:
            out = []
            for doc in scan.documents:
                out.append(chunk_document(doc, corpus=spec.id, config=chunking, urls=urls))
                self.tracker.note(spec.id, "chunk", len(out), len(scan.documents))
            return out

        articles = await asyncio.to_thread(chunk_all)
        await self.checkpoint("chunked")
        per_file = {a.path: len(a.chunks) for a in articles}
        files = [ManifestFile(path=e.path, status=e.status, size=e.size, raw_sha256=e.raw_sha256,
                              canonical_sha256=e.canonical_sha256, parser=e.parser, reason=e.reason,
                              detail=e.detail, warnings=list(e.warnings), chunks=per_file.get(e.path, 0))
                 for e in scan.manifest.entries]
        chunkless = [f.path for f in files if f.status == FileStatus.INDEXED and f.chunks == 0]
        if chunkless:
            raise RagmeshError(ErrorCode.BUILD_FAILED,
                               f"{len(chunkless)} file(s) should be indexable but yielded no chunks: "
                               f"{', '.join(chunkless[:10])}", {"files": chunkless})
        if not per_file or not sum(per_file.values()):
            raise RagmeshError(ErrorCode.BUILD_FAILED, f"corpus {spec.id} yielded no chunks",
                               {"files": len(files)})
        log.info("planned", extra={"fields": {"corpus": spec.id, "files": len(files), "documents": len(articles),
                                               "chunks": sum(per_file.values()), "scan_s": round(scanned_s, 2),
                                               "chunk_s": round(time.perf_counter() - started - scanned_s, 2)}})
        return BuildPlan(spec, scan, articles, chunking, files)

    async def _build(self, plan: BuildPlan, *, force: bool, actor: str, reason: str) -> BuildOutcome:
        spec = plan.spec
        model_id = await self.embedder.model_id()
        embedder = await self.embedder.identity()
        config_hash = self._config_hash(spec, plan.chunking, model_id, embedder)
        if not force:
            existing = await self.registry.find_by_hashes(spec.id, plan.content_hash, config_hash)
            # A candidate without stats was interrupted before it was complete: never reuse it.
            if (existing is not None and existing.stats.chunks > 0
                    and (await self.store.get_collection(existing.collection)).exists):
                return BuildOutcome(existing.index_version, True, existing.stats.documents, existing.stats.chunks,
                                    0, 0, existing.state.value, plan.content_hash, False, plan.files)

        index_version = _new_version(config_hash)
        collection = collection_name(spec.id, index_version)
        await self.manifests.save(_manifest(plan, index_version, config_hash))
        await self.checkpoint("manifest-written")
        await self.registry.create_candidate(
            spec.id, index_version, content_hash=plan.content_hash, config_hash=config_hash,
            collection=collection, actor=actor, reason=reason,
        )
        await self.checkpoint("candidate-created")
        writer = CollectionWriter(self.store, self.embedder, self.lexical, tracker=self.tracker,
                                  checkpoint=self.checkpoint, upsert_batch=self.options.upsert_batch)
        try:
            stats = await writer.write(spec, plan.articles, index_version, collection, model_id, embedder)
            await self.registry.set_stats(spec.id, index_version, stats)
            await self.tracker.report(spec.id, index_version, "built", stats.chunks, stats.chunks)
            await self.checkpoint("built")
        except BaseException as exc:
            # A failed build leaves a failed candidate; its collection may be partial, but no alias
            # points at it and retirement deletes it later.
            if not isinstance(exc, KeyboardInterrupt):
                await self._fail(spec.id, index_version, exc, actor)
            raise
        return BuildOutcome(index_version, False, stats.documents, stats.chunks, stats.embedded, stats.reused,
                            VersionState.CANDIDATE.value, plan.content_hash, False, plan.files)

    async def recover_interrupted(self, *, actor: str = "indexer") -> list[str]:
        """Fail the candidates a dead process left half-built (no stats recorded); run at start-up,
        before serving. Assumes one indexer per registry schema: another live indexer's running
        build would be failed too."""
        failed = []
        for corpus in await self.registry.list_corpora():
            for version in await self.registry.list_versions(corpus.id):
                if version.state == VersionState.CANDIDATE and version.stats.chunks == 0:
                    await self.registry.mark_failed(corpus.id, version.index_version,
                                                    {"error": "build interrupted"}, actor=actor,
                                                    reason="build interrupted")
                    failed.append(f"{corpus.id}/{version.index_version}")
        if failed:
            log.warning("interrupted builds failed", extra={"fields": {"versions": failed}})
        return failed

    async def _fail(self, corpus: str, index_version: str, exc: BaseException, actor: str) -> None:
        try:
            await asyncio.shield(self.registry.mark_failed(
                corpus, index_version, {"error": _safe(exc)}, actor=actor,
                reason="build cancelled" if isinstance(exc, asyncio.CancelledError) else "build failed"))
        except Exception:  # noqa: BLE001 - the original error matters more; start-up recovery retries
            log.warning("could not mark the build failed", exc_info=True)

    def _file_hook(self, corpus: str):
        """Called on the scan's worker thread after each file: progress, and the per-file checkpoint
        (run on the event loop, so an injected fault or test kill happens mid-scan)."""
        loop = asyncio.get_running_loop()
        checkpoint = self.checkpoint

        def on_file(done: int, total: int) -> None:
            self.tracker.note(corpus, "scan", done, total)
            if checkpoint is not no_checkpoint:
                asyncio.run_coroutine_threadsafe(checkpoint("parsed-file"), loop).result(timeout=60)

        return on_file

    async def _resolve_spec(self, spec: CorpusSpec, *, record: bool, admin: bool) -> CorpusSpec:
        """The request's description of the corpus; fields it leaves empty keep the registered
        value (a rebuild need not repeat the license), and without a root it is the registered one.
        Root and visibility follow corpus_roots.py: nothing is read before they pass."""
        try:
            known = await self.registry.get_corpus(spec.id)
        except RagmeshError as exc:
            if exc.code != ErrorCode.NOT_FOUND:
                raise
            known = None
        if not spec.root and known is None:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"corpus {spec.id} is unknown; give its source folder")
        if known is None:
            spec = msgspec.structs.replace(spec, visibility=self.roots.new_visibility(spec.visibility, admin=admin))
            registered = [c.root for c in await self.registry.list_corpora()]
        else:
            self.roots.check_change(known_root=known.root, known_visibility=known.visibility, root=spec.root,
                                    visibility=spec.visibility, admin=admin)
            spec = CorpusSpec(**{f: getattr(spec, f) or getattr(known, f) for f in CorpusSpec.__struct_fields__})
            registered = [known.root]
        spec = msgspec.structs.replace(spec, root=self.roots.resolve(spec.root, registered=registered, admin=admin))
        if record:
            await self.registry.upsert_corpus(spec)
        return spec

    def _chunking(self, spec: CorpusSpec) -> ChunkingConfig:
        if spec.chunking and spec.chunking != self.options.chunking.strategy:
            return msgspec.structs.replace(self.options.chunking, strategy=spec.chunking)
        return self.options.chunking

    def _config_hash(self, spec: CorpusSpec, chunking: ChunkingConfig, model_id: str,
                     embedder: EmbedderIdentity) -> str:
        # The whole identity: the same model id in another dtype or pooling makes other vectors.
        config = {
            "chunking": chunking.fingerprint, "model": model_id, "embedder": embedder.fingerprint,
            "lexical": self.lexical.version,
            "url_base": spec.url_base or self.options.url_base, "library": spec.library, "version": spec.version,
            "visibility": spec.visibility, "license": spec.license, "source_url": spec.source_url,
            "schema": 1,
        }
        return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def _manifest(plan: BuildPlan, index_version: str, config_hash: str) -> VersionManifest:
    spec = plan.spec
    by_status = {s: sum(1 for f in plan.files if f.status == s) for s in FileStatus}
    return VersionManifest(
        format=MANIFEST_FORMAT, corpus_id=spec.id, index_version=index_version,
        created_at=datetime.now(timezone.utc), content_hash=plan.content_hash, config_hash=config_hash,
        corpus=ManifestCorpus(library=spec.library, version=spec.version, root=spec.root,
                              include=list(spec.include), exclude=list(spec.exclude), visibility=spec.visibility,
                              license=spec.license, source_url=spec.source_url),
        totals=ManifestTotals(files=len(plan.files), indexed=by_status[FileStatus.INDEXED],
                              archived=by_status[FileStatus.ARCHIVED], failed=by_status[FileStatus.FAILED],
                              documents=len(plan.articles), chunks=plan.chunks),
        files=plan.files,
    )


def _new_version(config_hash: str) -> str:
    now = datetime.now(timezone.utc)
    return f"v{now:%Y%m%d%H%M%S}{now.microsecond // 1000:03d}-{config_hash[:6]}"


def _safe(exc: BaseException) -> str:
    if isinstance(exc, RagmeshError):
        return f"{exc.code.value}: {exc.message}"
    return type(exc).__name__
