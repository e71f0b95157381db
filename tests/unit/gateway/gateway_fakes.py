"""In-process fakes of the gateway's PORTS (never of Litestar, msgspec or the MCP SDK)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_gateway.access.ports import Caller
from ragmesh_gateway.catalog import ConfiguredCorpusDirectory, CorpusCatalog, CorpusInfo, IndexStats
from ragmesh_gateway.chat.ports import (
    AnswerGenerator,
    GeneratedSources,
    AnswerToken,
    GenerationEnd,
    GenerationEvent,
    GenerationRequest,
)
from ragmesh_gateway.composition import GatewayDeps
from ragmesh_gateway.files.ports import ConfiguredCorpusRoots
from ragmesh_gateway.health.ports import DependencyProbe
from ragmesh_gateway.index_admin.ports import (
    BuildResult,
    CorpusSpec,
    IndexAdmin,
    IndexStatus,
    PromoteResult,
    RemoveResult,
    VersionInfo,
)
from ragmesh_gateway.search.models import (
    Chunk,
    ChunkBatch,
    RerankCandidate,
    RerankedIndex,
    RetrievalQuery,
    RetrievalResult,
    ScoredChunk,
)
from ragmesh_gateway.search.ports import Reranker, SearchBackend
from ragmesh_gateway.sessions.ports import SessionMemory, Turn, unknown_session

SERVED = frozenset({"docs@1", "secret@1"})
# What AuthDisabled hands out: the local operator, every scope, every served corpus.
LOCAL = Caller("local", readable_corpora=SERVED)


def chunk_id(n: int) -> str:
    return str(uuid.UUID(int=n))


def make_chunk(
    n: int, *, corpus: str = "docs@1", quote: str | None = None, index_version: str = "v1"
) -> Chunk:
    return Chunk(
        chunk_id=chunk_id(n),
        parent_id=f"parent-{n}",
        doc_id=f"doc-{n}",
        corpus=corpus,
        library=corpus.split("@")[0],
        version=corpus.split("@")[-1],
        title=f"Title {n}",
        heading_path=("Guide", f"Section {n}"),
        url=f"https://docs.example/{n}",
        quote=quote if quote is not None else f"passage number {n}",
        source_path=f"guide/{n}.md",
        line_start=n * 10,
        line_end=n * 10 + 4,
        download_path=f"/api/rag/v1/files/{corpus}/guide/{n}.md",
        index_version=index_version,
    )


def scored(chunks: list[Chunk]) -> list[ScoredChunk]:
    count = len(chunks)
    return [
        ScoredChunk(chunk=c, scores={"dense": 0.5, "sparse": 1.0, "fused": (count - i) / count})
        for i, c in enumerate(chunks)
    ]


class FakeSearchBackend(SearchBackend):
    def __init__(self, chunks: list[Chunk] | None = None, *, degraded: list[str] | None = None) -> None:
        self.chunks = chunks if chunks is not None else [make_chunk(i) for i in range(1, 7)]
        self.degraded = degraded or []
        self.queries: list[RetrievalQuery] = []
        self.batch_calls: list[dict] = []
        self.error: RagmeshError | None = None

    async def search(self, query: RetrievalQuery) -> RetrievalResult:
        self.queries.append(query)
        if self.error:
            raise self.error
        return RetrievalResult(
            results=scored(self.chunks[: query.top_k]),
            query_mode="hybrid",
            index_versions=sorted({c.index_version for c in self.chunks}),
            degraded=list(self.degraded),
        )

    async def batch_get(
        self,
        chunk_ids: list[str],
        *,
        index_version: str,
        readable_corpora: tuple[str, ...],
        include_content: bool,
    ) -> ChunkBatch:
        self.batch_calls.append(
            {
                "ids": chunk_ids,
                "index_version": index_version,
                "readable": readable_corpora,
                "include_content": include_content,
            }
        )
        by_id = {c.chunk_id: c for c in self.chunks}
        return ChunkBatch(
            chunks=[by_id[i] for i in chunk_ids if i in by_id],
            missing=[i for i in chunk_ids if i not in by_id],
        )


class ReversingReranker(Reranker):
    """Ranks the texts in reverse order of arrival, with descending scores."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[RerankCandidate]]] = []

    async def rerank(self, query: str, candidates: list[RerankCandidate]) -> list[RerankedIndex]:
        self.calls.append((query, candidates))
        count = len(candidates)
        return [RerankedIndex(index=i, score=float(i) / count) for i in reversed(range(count))]


class FailingReranker(Reranker):
    def __init__(self, code: ErrorCode = ErrorCode.UNAVAILABLE) -> None:
        self.code = code
        self.calls = 0

    async def rerank(self, query: str, candidates: list[RerankCandidate]) -> list[RerankedIndex]:
        self.calls += 1
        raise RagmeshError(self.code, "rerank is unavailable")


class ScriptedGenerator(AnswerGenerator):
    """Plays a script of events; an exception in the script is raised at that point.

    ``hang_after`` makes it wait forever after that many events, to test cancellation.
    """

    def __init__(
        self,
        script: list[GenerationEvent | Exception] | None = None,
        *,
        hang_after: int | None = None,
        delay_s: float = 0.0,
    ) -> None:
        self.script = script if script is not None else default_script()
        self.hang_after = hang_after
        self.delay_s = delay_s
        self.requests: list[GenerationRequest] = []
        self.closed = asyncio.Event()
        self.cancelled = False

    async def generate(self, request: GenerationRequest) -> AsyncIterator[GenerationEvent]:
        self.requests.append(request)
        try:
            for i, item in enumerate(self.script):
                if self.hang_after is not None and i == self.hang_after:
                    await asyncio.Event().wait()
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                if isinstance(item, Exception):
                    raise item
                yield item
        except (asyncio.CancelledError, GeneratorExit):
            self.cancelled = True
            raise
        finally:
            self.closed.set()


def default_script() -> list[GenerationEvent | Exception]:
    return [
        AnswerToken("The answer "),
        AnswerToken("is 42 [S1]."),
        GeneratedSources(["S1"]),
        GenerationEnd(
            answer_status="answered",
            model="test-model",
            finish_reason="stop",
            answer="The answer is 42 [S1].",
        ),
    ]


class RecordingMemory(SessionMemory):
    """Sessions in a dict, with the port's rules: ids issued here, owners checked."""

    def __init__(self) -> None:
        self.turns: dict[str, list[Turn]] = {}
        self.owners: dict[str, str] = {}
        self.error: RagmeshError | None = None

    async def create(self, owner: str) -> str | None:
        if self.error:
            raise self.error
        session_id = f"rms_test{len(self.owners) + 1}"
        self.owners[session_id] = owner
        self.turns[session_id] = []
        return session_id

    async def history(self, session_id: str, owner: str) -> list[Turn]:
        if self.error:
            raise self.error
        if self.owners.get(session_id) != owner:
            raise unknown_session()
        return list(self.turns[session_id])

    async def remember(self, session_id: str, owner: str, turns: list[Turn]) -> None:
        if self.error:
            raise self.error
        self.turns.setdefault(session_id, []).extend(turns)


class FakeCatalog(CorpusCatalog):
    def __init__(self, corpora: list[CorpusInfo] | None = None) -> None:
        self.corpora = (
            corpora
            if corpora is not None
            else [
                CorpusInfo(
                    "docs@1", "docs", "1", active_index_version="v1", points=12, documents=3, state="active"
                ),
                CorpusInfo(
                    "secret@1",
                    "secret",
                    "1",
                    visibility="internal",
                    active_index_version="v7",
                    state="active",
                ),
            ]
        )
        self.requests: list[tuple[str, ...]] = []
        self.error: RagmeshError | None = None

    async def list_corpora(self, readable_corpora: tuple[str, ...]) -> list[CorpusInfo]:
        self.requests.append(readable_corpora)
        if self.error:
            raise self.error
        # Like retrieval: default deny, only corpora named in the ACL are listed.
        return [c for c in self.corpora if c.corpus in readable_corpora]

    async def stats(self, readable_corpora: tuple[str, ...]) -> IndexStats:
        return IndexStats(
            corpora=len(self.corpora),
            points=12,
            documents=3,
            embedding_model="test-embed",
            vector_size=384,
            lexical_tokenizer="bm25-test",
            store="memory",
        )


@dataclass
class FakeIndexAdmin(IndexAdmin):
    calls: list[tuple] = field(default_factory=list)

    async def build(self, spec: CorpusSpec, *, force: bool, actor: str, reason: str,
                    admin: bool) -> BuildResult:
        self.calls.append(("build", spec.corpus, force, actor, reason, admin))
        return BuildResult(index_version="v2", documents=3, chunks=12, embedded=12, state="candidate")

    async def promote(self, corpus: str, index_version: str, *, actor: str, reason: str) -> PromoteResult:
        self.calls.append(("promote", corpus, index_version, actor, reason))
        return PromoteResult(corpus=corpus, active_version=index_version, previous_version="v1", changed=True)

    async def rollback(self, corpus: str, *, actor: str, reason: str) -> PromoteResult:
        self.calls.append(("rollback", corpus, actor, reason))
        return PromoteResult(corpus=corpus, active_version="v1", previous_version="v2", changed=True)

    async def status(self, corpus: str) -> IndexStatus:
        self.calls.append(("status", corpus))
        return IndexStatus(corpus=corpus, active_version="v1", versions=[VersionInfo("v1", "active")])

    async def remove(self, corpus: str, *, dry_run: bool, actor: str, reason: str) -> RemoveResult:
        self.calls.append(("remove", corpus, dry_run, actor, reason))
        return RemoveResult(corpus=corpus, dry_run=dry_run, alias=f"rm__{corpus}")


class FakeProbe(DependencyProbe):
    def __init__(self, name: str, serving: bool = True) -> None:
        self.name = name
        self.serving = serving

    async def is_serving(self) -> bool:
        return self.serving


def fake_deps(**overrides) -> GatewayDeps:
    values = dict(
        search_backend=FakeSearchBackend(),
        reranker=ReversingReranker(),
        generator=ScriptedGenerator(),
        catalog=FakeCatalog(),
        index_admin=FakeIndexAdmin(),
        probes=[FakeProbe("retrieval"), FakeProbe("rerank"), FakeProbe("generation")],
        corpus_roots=ConfiguredCorpusRoots({}),
        directory=ConfiguredCorpusDirectory(SERVED),
    )
    values.update(overrides)
    return GatewayDeps(**values)
