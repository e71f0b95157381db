"""ragmesh.v1.Indexer: protobuf in, application services, protobuf out. Nothing else."""

from __future__ import annotations

import asyncio

from ragmesh.v1 import indexer_pb2, indexer_pb2_grpc
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.text_safety import check_text
from ragmesh_indexer.build import IndexBuilder
from ragmesh_indexer.inspection import CorpusInspector
from ragmesh_indexer.manifests import FileChange, ManifestFile
from ragmesh_indexer.promotion import Promoter
from ragmesh_indexer.registry import CorpusSpec, IndexRegistry
from ragmesh_indexer.removal import CorpusRemover
from ragmesh_indexer.validation import Validator


def spec_from_proto(msg: indexer_pb2.CorpusSpec) -> CorpusSpec:
    for name in ("corpus", "library", "version", "root", "visibility", "license", "source_url", "url_base",
                 "chunking"):
        check_text(getattr(msg, name), f"corpus.{name}")
    for name in ("include", "exclude"):
        for index, pattern in enumerate(getattr(msg, name)):
            check_text(pattern, f"corpus.{name}[{index}]")
    if not msg.corpus.strip():
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "corpus id is required")
    if msg.visibility and msg.visibility not in ("public", "internal"):
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, "visibility must be public or internal")
    library = msg.library or msg.corpus.split("@", 1)[0]
    version = msg.version or (msg.corpus.split("@", 1)[1] if "@" in msg.corpus else "main")
    return CorpusSpec(
        id=msg.corpus, library=library, version=version, root=msg.root, include=list(msg.include),
        exclude=list(msg.exclude), visibility=msg.visibility, license=msg.license,
        source_url=msg.source_url, url_base=msg.url_base, chunking=msg.chunking,
    )


class IndexerServicer(indexer_pb2_grpc.IndexerServicer):
    def __init__(self, registry: IndexRegistry, builder: IndexBuilder, validator: Validator,
                 promoter: Promoter, inspector: CorpusInspector, remover: CorpusRemover | None = None) -> None:
        self.registry = registry
        # Removal works on the store promotion swaps aliases in.
        self.remover = remover or (CorpusRemover(registry, promoter.store) if promoter is not None else None)
        self.builder = builder
        self.validator = validator
        self.promoter = promoter
        self.inspector = inspector
        # One build per corpus at a time; builds of different corpora run side by side.
        self._locks: dict[str, asyncio.Lock] = {}

    def _lock(self, corpus: str) -> asyncio.Lock:
        return self._locks.setdefault(corpus, asyncio.Lock())

    async def Build(self, request, context):
        spec = spec_from_proto(request.corpus)
        _check_texts(request, "actor", "reason")
        async with self._lock(spec.id):
            out = await self.builder.build(spec, force=request.force, actor=request.actor or "unknown",
                                           reason=request.reason, dry_run=request.dry_run, admin=request.admin)
        return indexer_pb2.BuildResponse(
            index_version=out.index_version, reused_existing=out.reused_existing, documents=out.documents,
            chunks=out.chunks, embedded=out.embedded, reused_vectors=out.reused_vectors, state=out.state,
            files=[_file_report(f) for f in out.files], dry_run=out.dry_run, content_hash=out.content_hash,
        )

    async def Validate(self, request, context):
        _check_texts(request, "corpus", "index_version")
        _require(request.corpus, "corpus")
        _require(request.index_version, "index_version")
        async with self._lock(request.corpus):
            passed, gates = await self.validator.validate(request.corpus, request.index_version)
        return indexer_pb2.ValidateResponse(
            index_version=request.index_version, passed=passed,
            gates=[indexer_pb2.GateResult(gate=g.gate, passed=g.passed, detail=g.detail) for g in gates],
        )

    async def Promote(self, request, context):
        _check_texts(request, "corpus", "index_version", "actor", "reason")
        _require(request.corpus, "corpus")
        _require(request.index_version, "index_version")
        async with self._lock(request.corpus):
            result = await self.promoter.promote(request.corpus, request.index_version,
                                                 actor=request.actor or "unknown", reason=request.reason)
        return _promotion(result)

    async def Rollback(self, request, context):
        _check_texts(request, "corpus", "actor", "reason")
        _require(request.corpus, "corpus")
        async with self._lock(request.corpus):
            result = await self.promoter.rollback(request.corpus, actor=request.actor or "unknown",
                                                  reason=request.reason)
        return _promotion(result)

    async def Status(self, request, context):
        _check_texts(request, "corpus")
        _require(request.corpus, "corpus")
        live = self.builder.tracker.get(request.corpus)
        if live is None:  # a corpus being added (or dry-run) has no registry row yet
            await self.registry.get_corpus(request.corpus)
        versions = await self.registry.list_versions(request.corpus)
        active = next((v.index_version for v in versions if v.state.value == "active"), "")
        # This process's running build first (it may have no version yet), then builds other
        # processes recorded in the registry; finished candidates ("built") await validation.
        in_progress = []
        if live is not None:
            in_progress.append(indexer_pb2.BuildProgress(index_version=live.index_version, stage=live.stage,
                                                         done=live.done, total=live.total))
        for p in await self.registry.get_progress(request.corpus):
            if p.stage != "built" and (live is None or p.index_version != live.index_version):
                in_progress.append(indexer_pb2.BuildProgress(index_version=p.index_version, stage=p.stage,
                                                             done=p.done, total=p.total))
        return indexer_pb2.StatusResponse(
            corpus=request.corpus, active_version=active,
            versions=[indexer_pb2.VersionInfo(
                index_version=v.index_version, state=v.state.value, created_at=v.created_at.isoformat(),
                actor=v.created_by, reason=v.reason, chunks=v.stats.chunks, documents=v.stats.documents)
                for v in versions],
            in_progress=in_progress,
        )

    async def Diff(self, request, context):
        _check_texts(request, "corpus", "from_version", "to_version")
        _require(request.corpus, "corpus")
        found = await self.inspector.diff(request.corpus, request.from_version, request.to_version)
        return indexer_pb2.DiffResponse(
            corpus=request.corpus, from_version=found.before.index_version, to_version=found.after.index_version,
            files=[_change(c) for c in found.diff.changes], unchanged=found.diff.unchanged,
            from_chunks=found.before.totals.chunks, to_chunks=found.after.totals.chunks,
            from_documents=found.before.totals.documents, to_documents=found.after.totals.documents,
        )

    async def Verify(self, request, context):
        _check_texts(request, "corpus")
        _require(request.corpus, "corpus")
        found = await self.inspector.verify(request.corpus)
        return indexer_pb2.VerifyResponse(corpus=request.corpus, index_version=found.index_version, ok=found.ok,
                                          checked=found.checked, drift=[_change(c) for c in found.diff.changes])


    async def Remove(self, request, context):
        _check_texts(request, "corpus", "actor", "reason")
        _require(request.corpus, "corpus")
        async with self._lock(request.corpus):  # after a build of it in this process, never during
            out = await self.remover.remove(request.corpus, actor=request.actor or "unknown",
                                            reason=request.reason, dry_run=request.dry_run)
        return indexer_pb2.RemoveResponse(
            corpus=out.corpus, dry_run=out.dry_run, alias=out.alias, alias_existed=out.alias_existed,
            versions=[indexer_pb2.RemovedVersion(index_version=v.index_version, state=v.state,
                                                 collection=v.collection, chunks=v.chunks,
                                                 collection_exists=v.collection_exists) for v in out.versions],
            collections_deleted=out.collections_deleted,
        )


def _file_report(f: ManifestFile) -> indexer_pb2.FileReport:
    return indexer_pb2.FileReport(path=f.path, status=f.status, reason=f.reason, parser=f.parser, chunks=f.chunks,
                                  detail=f.detail, warnings=list(f.warnings))


def _change(c: FileChange) -> indexer_pb2.FileChange:
    a, b = c.before, c.after
    return indexer_pb2.FileChange(
        path=c.path, change=c.change, from_sha256=a.raw_sha256 if a else "", to_sha256=b.raw_sha256 if b else "",
        from_chunks=a.chunks if a else 0, to_chunks=b.chunks if b else 0,
        from_status=a.status if a else "", to_status=b.status if b else "",
    )


def _promotion(result) -> indexer_pb2.PromoteResponse:
    return indexer_pb2.PromoteResponse(corpus=result.corpus, active_version=result.active,
                                       previous_version=result.previous or "", changed=result.changed)


def _check_texts(request, *names: str) -> None:
    """Text PostgreSQL cannot hold (NUL, ...) is refused before any registry call."""
    for name in names:
        check_text(getattr(request, name), name)


def _require(value: str, name: str) -> None:
    if not value or not value.strip():
        raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"{name} is required")
