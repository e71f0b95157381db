"""Domain types of search: what retrieval returns and what the pipeline passes along.

Plain dataclasses, free of protobuf and HTTP types; adapters translate at the edges. A chunk is the
mesh-wide record ``ragmesh_common.chunk_record.Chunk``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ragmesh_common.chunk_record import Chunk


@dataclass(frozen=True, slots=True)
class ScoredChunk:
    chunk: Chunk
    # Ordering signals by stage ("dense", "sparse", "fused", "rerank"); not probabilities.
    scores: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Filters:
    corpora: tuple[str, ...] = ()
    library: str = ""
    version: str = ""
    tags: tuple[str, ...] = ()
    path_prefix: str = ""


@dataclass(frozen=True, slots=True)
class RetrievalQuery:
    query: str
    top_k: int
    filters: Filters
    # The caller's ACL as retrieval applies it: empty means unrestricted.
    readable_corpora: tuple[str, ...]
    include_content: bool


@dataclass(frozen=True, slots=True)
class RetrievalResult:
    results: list[ScoredChunk]
    query_mode: str = ""
    index_versions: list[str] = field(default_factory=list)
    degraded: list[str] = field(default_factory=list)
    filtered_by_threshold: int = 0
    hint: str = ""
    top_k_truncated: bool = False
    skipped_libraries: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class RerankedIndex:
    index: int  # position in the texts sent to the reranker
    score: float


@dataclass(frozen=True, slots=True)
class RerankCandidate:
    text: str  # what the indexer embedded for the chunk (title > headings, then the quote)
    dense: float | None = None  # retrieval's cosine, fused with the reranker's score as a prior
    sparse: float | None = None  # retrieval's BM25 over the collection, likewise


@dataclass(frozen=True, slots=True)
class ChunkBatch:
    chunks: list[Chunk]
    missing: list[str]
