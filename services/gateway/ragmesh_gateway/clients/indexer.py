"""Indexer over gRPC: the IndexAdmin port."""

from __future__ import annotations

from ragmesh.v1 import indexer_pb2, indexer_pb2_grpc
from ragmesh_common.rpc.client import unary

from ragmesh_gateway.clients.channels import Channels
from ragmesh_gateway.clients.convert import message_from, record_from
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

PEER = "indexer"


def _promotion(reply: indexer_pb2.PromoteResponse) -> PromoteResult:
    return record_from(PromoteResult, reply)


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
            corpus=message_from(indexer_pb2.CorpusSpec, spec), force=force, actor=actor, reason=reason, admin=admin
        )
        reply = await unary(self._stub.Build, request, timeout=self._build_timeout_s, peer=PEER)
        return record_from(BuildResult, reply, files=[record_from(FileReport, f) for f in reply.files])

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
        return record_from(
            IndexStatus,
            reply,
            versions=[record_from(VersionInfo, v) for v in reply.versions],
            in_progress=[record_from(BuildProgress, p) for p in reply.in_progress],
        )

    async def remove(self, corpus: str, *, dry_run: bool, actor: str, reason: str) -> RemoveResult:
        request = indexer_pb2.RemoveRequest(corpus=corpus, dry_run=dry_run, actor=actor, reason=reason)
        reply = await unary(self._stub.Remove, request, timeout=self._timeout_s, peer=PEER)
        return record_from(RemoveResult, reply, versions=[record_from(RemovedVersion, v) for v in reply.versions])
