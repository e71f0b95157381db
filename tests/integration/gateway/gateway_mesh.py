"""Real gRPC servers standing in for retrieval, rerank, generation and the indexer, with canned data.

They are test doubles of OTHER services, served through the same ragmesh_common GrpcServer
(interceptors, health, error mapping) as the real ones, so the gateway talks real gRPC to them.
They run on their own event loop in a background thread, as separate processes would: Litestar's
AsyncTestClient drives the app through a blocking portal, which stalls the test's own loop.
The ``mesh`` and ``client`` fixtures live in conftest.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field

import grpc
from litestar import Litestar

from ragmesh.v1 import (
    common_pb2,
    generation_pb2,
    generation_pb2_grpc,
    indexer_pb2,
    indexer_pb2_grpc,
    rerank_pb2,
    rerank_pb2_grpc,
    retrieval_pb2,
    retrieval_pb2_grpc,
)
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.rpc.server import GrpcServer

from ragmesh_gateway.settings import DEFAULT_ALLOWED_HOSTS, GatewaySettings

CORPUS = "docs@1"


def chunk_id(n: int) -> str:
    return str(uuid.UUID(int=n))


def make_chunk(n: int, corpus: str = CORPUS) -> common_pb2.Chunk:
    return common_pb2.Chunk(
        chunk_id=chunk_id(n),
        parent_id=f"p{n}",
        doc_id=f"d{n}",
        corpus=corpus,
        library="docs",
        version="1",
        title=f"Page {n}",
        heading_path=["Guide", f"Part {n}"],
        url=f"https://docs.example/page{n}",
        quote=f"quote number {n}",
        source_path=f"guide/page{n}.md",
        line_start=n,
        line_end=n + 3,
        download_path=f"/api/rag/v1/files/{corpus}/guide/page{n}.md",
        index_version="v1",
    )


def metadata_of(context: grpc.aio.ServicerContext) -> dict[str, str]:
    return {k: v for k, v in (context.invocation_metadata() or ()) if isinstance(v, str)}


class RetrievalDouble(retrieval_pb2_grpc.RetrievalServicer):
    def __init__(self) -> None:
        self.chunks = [make_chunk(n) for n in range(1, 7)]
        self.searches: list[retrieval_pb2.SearchRequest] = []
        self.honour_acl = True
        # (corpus, source_path) pairs the active index holds beyond those of ``chunks``.
        self.indexed_files: set[tuple[str, str]] = set()
        self.source_checks: list[retrieval_pb2.HasSourceRequest] = []
        self.metadata: list[dict[str, str]] = []
        self.corpora = [
            retrieval_pb2.CorpusInfo(
                corpus=CORPUS,
                library="docs",
                version="1",
                visibility="public",
                active_index_version="v1",
                points=6,
                documents=6,
                state="active",
            )
        ]

    async def Search(self, request, context):
        self.searches.append(request)
        self.metadata.append(metadata_of(context))
        # Like real retrieval: the ACL and the corpus filter are applied inside the query (unless a
        # test makes this double leak, to show the gateway filters again).
        readable = set(request.readable_corpora) if self.honour_acl else {c.corpus for c in self.chunks}
        wanted = set(request.filters.corpora) or readable
        chunks = [c for c in self.chunks if c.corpus in readable and c.corpus in wanted]
        count = len(chunks)
        results = [
            common_pb2.ScoredChunk(
                chunk=c, scores={"dense": 0.5, "sparse": 2.0, "fused": (count - i) / count}
            )
            for i, c in enumerate(chunks[: request.top_k])
        ]
        return retrieval_pb2.SearchResponse(results=results, query_mode="hybrid", index_versions=["v1"])

    async def BatchGetChunks(self, request, context):
        readable = set(request.readable_corpora) if self.honour_acl else {c.corpus for c in self.chunks}
        by_id = {c.chunk_id: c for c in self.chunks if c.corpus in readable}
        return retrieval_pb2.BatchGetChunksResponse(
            chunks=[by_id[i] for i in request.chunk_ids if i in by_id],
            missing=[i for i in request.chunk_ids if i not in by_id],
        )

    async def ListCorpora(self, request, context):
        readable = set(request.readable_corpora)
        return retrieval_pb2.ListCorporaResponse(corpora=[c for c in self.corpora if c.corpus in readable])

    async def HasSource(self, request, context):
        self.source_checks.append(request)
        held = self.indexed_files | {(c.corpus, c.source_path) for c in self.chunks}
        found = request.corpus in set(request.readable_corpora) and (request.corpus, request.source_path) in held
        return retrieval_pb2.HasSourceResponse(found=found, index_version="v1" if found else "")

    async def Stats(self, request, context):
        listed = [c for c in self.corpora if c.corpus in set(request.readable_corpora)]
        return retrieval_pb2.StatsResponse(
            corpora=len(listed),
            points=sum(c.points for c in listed),
            documents=sum(c.documents for c in listed),
            embedding_model="test-embed",
            vector_size=384,
            lexical_tokenizer="bm25",
            store="qdrant-local",
        )


class RerankDouble(rerank_pb2_grpc.RerankServicer):
    """mode: "reverse" (last candidate first), "down" (UNAVAILABLE), "slow" (past any deadline)."""

    def __init__(self) -> None:
        self.mode = "reverse"
        self.calls = 0

    async def Rerank(self, request, context):
        self.calls += 1
        if self.mode == "down":
            raise RagmeshError(ErrorCode.UNAVAILABLE, "rerank runtime is unavailable")
        if self.mode == "slow":
            await asyncio.sleep(30)
        count = len(request.texts)
        return rerank_pb2.RerankResponse(
            results=[rerank_pb2.RerankResult(index=i, score=i / count) for i in reversed(range(count))],
            model_id="test-rerank",
        )


class GenerationDouble(generation_pb2_grpc.GenerationServicer):
    """mode: "answer", "fail_mid" (tokens then an error), "hang" (one token, then waits), "slow_start"."""

    def __init__(self) -> None:
        self.mode = "answer"
        self.requests: list[generation_pb2.GenerateRequest] = []
        self.metadata: list[dict[str, str]] = []
        self.cancelled = threading.Event()
        self.slow_start_s = 0.0

    async def Generate(self, request, context):
        self.requests.append(request)
        self.metadata.append(metadata_of(context))
        try:
            if self.mode == "slow_start":
                await asyncio.sleep(self.slow_start_s)
            yield generation_pb2.GenerateEvent(token=generation_pb2.TokenDelta(text="Grounded "))
            if self.mode == "hang":
                await asyncio.sleep(3600)
            if self.mode == "fail_mid":
                raise RagmeshError(ErrorCode.RUNTIME_ERROR, "the model runtime failed")
            yield generation_pb2.GenerateEvent(token=generation_pb2.TokenDelta(text="answer [S1]."))
            first = request.sources[0]
            yield generation_pb2.GenerateEvent(sources=generation_pb2.SourceList(sources=[first]))
            yield generation_pb2.GenerateEvent(
                done=generation_pb2.Terminal(
                    answer_status="answered",
                    model="test-llm",
                    finish_reason="stop",
                    answer="Grounded answer [S1].",
                )
            )
        except asyncio.CancelledError:
            self.cancelled.set()
            raise


class IndexerDouble(indexer_pb2_grpc.IndexerServicer):
    def __init__(self) -> None:
        self.requests: list = []

    async def Build(self, request, context):
        self.requests.append(request)
        return indexer_pb2.BuildResponse(
            index_version="v2",
            documents=6,
            chunks=6,
            embedded=6,
            state="candidate",
            files=[indexer_pb2.FileReport(path="a.md", status="indexed", chunks=6)],
        )

    async def Promote(self, request, context):
        self.requests.append(request)
        if request.index_version == "missing":
            raise RagmeshError(ErrorCode.NOT_FOUND, "no such index version")
        return indexer_pb2.PromoteResponse(
            corpus=request.corpus, active_version=request.index_version, previous_version="v1", changed=True
        )

    async def Rollback(self, request, context):
        self.requests.append(request)
        return indexer_pb2.PromoteResponse(
            corpus=request.corpus, active_version="v1", previous_version="v2", changed=True
        )

    async def Status(self, request, context):
        self.requests.append(request)
        return indexer_pb2.StatusResponse(
            corpus=request.corpus,
            active_version="v1",
            versions=[indexer_pb2.VersionInfo(index_version="v1", state="active")],
        )

    async def Validate(self, request, context):
        self.requests.append(request)
        return indexer_pb2.ValidateResponse(index_version=request.index_version, passed=True, gates=[
            indexer_pb2.GateResult(gate="golden_recall", passed=True, detail="6/6 answerable")])

    async def Diff(self, request, context):
        self.requests.append(request)
        return indexer_pb2.DiffResponse(
            corpus=request.corpus, from_version="v1", to_version="v2", unchanged=5, from_chunks=6, to_chunks=7,
            from_documents=6, to_documents=6,
            files=[indexer_pb2.FileChange(path="a.md", change="changed", from_sha256="aa", to_sha256="bb",
                                          from_chunks=1, to_chunks=2, from_status="indexed", to_status="indexed")])

    async def Verify(self, request, context):
        self.requests.append(request)
        return indexer_pb2.VerifyResponse(corpus=request.corpus, index_version="v1", ok=True, checked=6)

    async def Remove(self, request, context):
        self.requests.append(request)
        if request.corpus == "missing@0":
            raise RagmeshError(ErrorCode.NOT_FOUND, f"unknown corpus {request.corpus!r}")
        collection = f"rm__{request.corpus.replace('@', '-').replace('.', '-')}__v1"
        return indexer_pb2.RemoveResponse(
            corpus=request.corpus, dry_run=request.dry_run, alias=collection.rsplit("__", 1)[0], alias_existed=True,
            versions=[indexer_pb2.RemovedVersion(index_version="v1", state="active", collection=collection, chunks=6,
                                                 collection_exists=True)],
            collections_deleted=[] if request.dry_run else [collection],
        )


@dataclass
class Mesh:
    retrieval: RetrievalDouble
    rerank: RerankDouble
    generation: GenerationDouble
    indexer: IndexerDouble
    loop: asyncio.AbstractEventLoop
    servers: dict[str, GrpcServer] = field(default_factory=dict)
    # The model runtime behind each double, as it reports it in gRPC health (ragmesh.model.<name>).
    models_up: dict[str, bool] = field(
        default_factory=lambda: {"embedding": True, "rerank": True, "generation": True})

    def settings(self, **overrides) -> GatewaySettings:
        values = dict(
            retrieval_addr=f"127.0.0.1:{self.servers['retrieval'].port}",
            rerank_addr=f"127.0.0.1:{self.servers['rerank'].port}",
            generation_addr=f"127.0.0.1:{self.servers['generation'].port}",
            indexer_addr=f"127.0.0.1:{self.servers['indexer'].port}",
            rerank_timeout_s=1.0,
            health_timeout_s=1.0,
            corpora=[CORPUS],
            # Litestar's test client sends "Host: testserver.local"; every route checks the name.
            allowed_hosts=[*DEFAULT_ALLOWED_HOSTS, "testserver.local"],
        )
        values.update(overrides)
        return GatewaySettings(**values)

    def run(self, coro, timeout: float = 15):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def stop(self, name: str) -> None:
        await asyncio.wrap_future(
            asyncio.run_coroutine_threadsafe(self.servers[name].server.stop(None), self.loop)
        )


async def _start_servers(mesh: Mesh) -> None:
    for name, register, servicer, full in [
        (
            "retrieval",
            retrieval_pb2_grpc.add_RetrievalServicer_to_server,
            mesh.retrieval,
            "ragmesh.v1.Retrieval",
        ),
        ("rerank", rerank_pb2_grpc.add_RerankServicer_to_server, mesh.rerank, "ragmesh.v1.Rerank"),
        (
            "generation",
            generation_pb2_grpc.add_GenerationServicer_to_server,
            mesh.generation,
            "ragmesh.v1.Generation",
        ),
        ("indexer", indexer_pb2_grpc.add_IndexerServicer_to_server, mesh.indexer, "ragmesh.v1.Indexer"),
    ]:
        server = GrpcServer(f"test-{name}", host="127.0.0.1", port=0, metrics_port=None)
        server.add(register, servicer, full)
        model = {"retrieval": "embedding", "rerank": "rerank", "generation": "generation"}.get(name)
        if model:
            server.watch_model(model, _model_probe(mesh, model))
        await server.start()
        mesh.servers[name] = server


def _model_probe(mesh: Mesh, model: str):
    async def probe() -> bool:
        return mesh.models_up[model]

    return probe


async def _stop_servers(mesh: Mesh) -> None:
    for server in mesh.servers.values():
        await server.server.stop(None)


@contextlib.contextmanager
def running_mesh() -> Iterator[Mesh]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="grpc-doubles", daemon=True)
    thread.start()
    mesh = Mesh(RetrievalDouble(), RerankDouble(), GenerationDouble(), IndexerDouble(), loop=loop)
    try:
        mesh.run(_start_servers(mesh))
        yield mesh
    finally:
        mesh.run(_stop_servers(mesh))
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def as_loopback(app: Litestar) -> Litestar:
    """The test client's peer is "testclient"; this app sees 127.0.0.1 instead, as a local operator
    would be seen (with authentication disabled only loopback callers may use the internal routes)."""
    inner = app.asgi_handler

    async def handler(scope, receive, send):
        if scope["type"] == "http":
            scope["client"] = ("127.0.0.1", 50000)
        await inner(scope, receive, send)

    app.asgi_handler = handler
    return app
