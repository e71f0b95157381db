"""Retrieval's domain types; the servicer maps them to and from protobuf."""

from __future__ import annotations

import msgspec

from ragmesh_common.chunk_record import Chunk


class SearchLimits(msgspec.Struct, frozen=True):
    max_query_chars: int = 2000
    max_top_k: int = 50
    max_libraries: int = 8
    # The relevance threshold. RRF scores only rank, they say nothing about relevance, so a hit must
    # pass on one of its own signals: the cosine of the query vector and its dense vector, or its
    # BM25 score. The BM25 floor lets through a chunk that mixes topics ("Peyton Manning ... Lady
    # Gaga performed the national anthem"), whose cosine to a question about its minor topic is
    # low but which holds the question's rare words: 7 is about one term found in one chunk of a
    # thousand, or two terms each in one of fifty (IDF ln(N/n)). Sparse-only (degraded) searches
    # have no dense signal and apply no threshold.
    min_dense_score: float = 0.2
    min_sparse_score: float = 7.0
    candidates: int = 50
    rrf_k: int = 60
    embed_timeout_s: float = 3.0
    # Which signals a search uses: "hybrid" (dense + BM25, fused), or one alone. The single-signal
    # modes exist for evaluation (bench/eval_retrieval.py measures each stage) and for operators
    # who want to rule one signal out; they are not a degradation and are not reported as one.
    mode: str = "hybrid"
    # Queries written mostly in Chinese with mode "hybrid": "sparse" searches them by BM25 alone,
    # because the default embedder (all-MiniLM-L6-v2) was trained on English and its vectors only
    # add noise to the fusion (XQuAD-zh: dense nDCG@10 0.19, BM25 0.96, their RRF 0.53). Set
    # "hybrid" with a multilingual embedder.
    cjk_mode: str = "sparse"


SEARCH_MODES = ("hybrid", "dense", "sparse")


class SearchInput(msgspec.Struct, frozen=True):
    query: str
    top_k: int
    readable_corpora: tuple[str, ...]
    corpora: tuple[str, ...] = ()
    library: str = ""
    version: str = ""
    tags: tuple[str, ...] = ()
    path_prefix: str = ""
    include_content: bool = False


class ScoredChunk(msgspec.Struct):
    chunk: Chunk
    scores: dict[str, float]


class SearchOutcome(msgspec.Struct):
    results: list[ScoredChunk]
    query_mode: str
    index_versions: list[str]
    degraded: list[str] = []
    filtered_by_threshold: int = 0
    hint: str = ""
    top_k_truncated: bool = False
    skipped_libraries: list[str] = []


class ChunkBatch(msgspec.Struct):
    chunks: list[Chunk]
    missing: list[str]


class CorpusSummary(msgspec.Struct):
    corpus: str
    library: str
    version: str
    visibility: str
    active_index_version: str
    points: int
    documents: int
    state: str
    license: str
    source_url: str
    root: str = ""
    embedder: str = ""  # the identity of the embedder that built the active index, one line
    search: str = ""  # hybrid, keyword_only or unknown (CorpusDirectory.list_corpora)
    keyword_only_reason: str = ""


class StoreStats(msgspec.Struct):
    corpora: int
    points: int
    documents: int
    embedding_model: str
    vector_size: int
    lexical_tokenizer: str
    store: str


class SourceHit(msgspec.Struct, frozen=True):
    """Whether a corpus's active index holds a source file, and which version holds it."""

    found: bool
    index_version: str = ""
