"""Indexer over gRPC: the IndexAdmin port."""

from __future__ import annotations

from ragmesh.v1 import indexer_pb2, indexer_pb2_grpc
from ragmesh_common.rpc.client import unary

from ragmesh_gateway.index_admin.ports import (
    BuildProgress,
    BuildResult,
    CorpusSpec,
    FileReport,
    IndexAdmin,
    IndexStatus,
    PromoteResult,
    RemovedVersion,
    RemoveResult,
    VersionInfo,
)
from ragmesh_gateway.upstream.channels import Channels

PEER = "indexer"


def _promotion(reply: indexer_pb2.PromoteResponse) -> PromoteResult:
    return PromoteResult(
        corpus=reply.corpus,
        active_version=reply.active_version,
        previous_version=reply.previous_version,
        changed=reply.changed,
    )


class GrpcIndexAdmin(IndexAdmin):
    def __init__(self, channels: Channels, *, timeout_s: float, build_timeout_s: float) -> None:
        self._channels = channels
        self._timeout_s = timeout_s
        self._build_timeout_s = build_timeout_s

    @property
    def _stub(self) -> indexer_pb2_grpc.IndexerStub:
        return indexer_pb2_grpc.IndexerStub(self._channels.get(PEER))

    async def build(self, spec: CorpusSpec, *, force: bool, actor: str, reason: str,
                    admin: bool) -> BuildResult:
        request = indexer_pb2.BuildRequest(
            corpus=indexer_pb2.CorpusSpec(
                corpus=spec.corpus,
                library=spec.library,
                version=spec.version,
                root=spec.root,
                include=spec.include,
                exclude=spec.exclude,
                visibility=spec.visibility,
                license=spec.license,
                source_url=spec.source_url,
                url_base=spec.url_base,
                chunking=spec.chunking,
            ),
            force=force,
            actor=actor,
            reason=reason,
            admin=admin,
        )
        reply = await unary(self._stub.Build, request, timeout=self._build_timeout_s, peer=PEER)
        return BuildResult(
            index_version=reply.index_version,
            reused_existing=reply.reused_existing,
            documents=reply.documents,
            chunks=reply.chunks,
            embedded=reply.embedded,
            reused_vectors=reply.reused_vectors,
            state=reply.state,
            files=[FileReport(f.path, f.status, f.reason, f.parser, f.chunks) for f in reply.files],
        )

    async def promote(self, corpus: str, index_version: str, *, actor: str, reason: str) -> PromoteResult:
        request = indexer_pb2.PromoteRequest(
            corpus=corpus, index_version=index_version, actor=actor, reason=reason
        )
        return _promotion(await unary(self._stub.Promote, request, timeout=self._timeout_s, peer=PEER))

    async def rollback(self, corpus: str, *, actor: str, reason: str) -> PromoteResult:
        request = indexer_pb2.RollbackRequest(corpus=corpus, actor=actor, reason=reason)
        return _promotion(await unary(self._stub.Rollback, request, timeout=self._timeout_s, peer=PEER))

    async def status(self, corpus: str) -> IndexStatus:
        reply = await unary(
            self._stub.Status, indexer_pb2.StatusRequest(corpus=corpus), timeout=self._timeout_s, peer=PEER
        )
        return IndexStatus(
            corpus=reply.corpus,
            active_version=reply.active_version,
            versions=[
                VersionInfo(v.index_version, v.state, v.created_at, v.actor, v.reason, v.chunks, v.documents)
                for v in reply.versions
            ],
            in_progress=[BuildProgress(p.index_version, p.stage, p.done, p.total) for p in reply.in_progress],
        )

    async def remove(self, corpus: str, *, dry_run: bool, actor: str, reason: str) -> RemoveResult:
        request = indexer_pb2.RemoveRequest(corpus=corpus, dry_run=dry_run, actor=actor, reason=reason)
        reply = await unary(self._stub.Remove, request, timeout=self._timeout_s, peer=PEER)
        return RemoveResult(
            corpus=reply.corpus,
            dry_run=reply.dry_run,
            alias=reply.alias,
            alias_existed=reply.alias_existed,
            versions=[RemovedVersion(v.index_version, v.state, v.collection, v.chunks, v.collection_exists)
                      for v in reply.versions],
            collections_deleted=list(reply.collections_deleted),
        )
