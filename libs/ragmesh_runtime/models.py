"""Load the runtime's models once, from verified files inside installed packages."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from dataclasses import dataclass

from ragmesh_runtime.e5_similarity import E5Similarity
from ragmesh_runtime.encoder import MiniLmEncoder
from ragmesh_runtime.model_files import (
    E5_MODEL,
    MINILM_ONNX,
    MINILM_TOKENIZER,
    WORDLLAMA_TOKENIZER,
    WORDLLAMA_WEIGHTS,
    VerifiedFile,
    enforce_offline,
    verify,
)
from ragmesh_runtime.relevance import bm25_term_cache
from ragmesh_runtime.settings import RuntimeSettings
from ragmesh_runtime.text_features import TextFeatureCache
from ragmesh_runtime.wordllama_similarity import WordLlamaSimilarity

log = logging.getLogger("ragmesh_runtime")


@dataclass(frozen=True)
class LoadedModels:
    encoder: MiniLmEncoder
    wordllama: WordLlamaSimilarity | None
    files: tuple[VerifiedFile, ...]
    load_seconds: float
    bm25_terms: TextFeatureCache | None = None  # request BM25's term ids by text
    e5: E5Similarity | None = None  # the reranker's signal for Chinese queries

    def cache_files(self, vector_file: Path) -> dict[Path, TextFeatureCache]:
        """Where each text feature cache is kept, beside the vector cache file."""
        caches = {vector_file.with_name(vector_file.stem + ".wordpiece.npz"): self.encoder.token_cache}
        if self.bm25_terms is not None:
            caches[vector_file.with_name(vector_file.stem + ".bm25-terms.npz")] = self.bm25_terms
        if self.e5 is not None:
            caches[vector_file.with_name(vector_file.stem + ".e5-passages.npz")] = self.e5.cache
        return caches


def load_models(settings: RuntimeSettings) -> LoadedModels:
    """Verify every file against its pin, then load; raises ModelIntegrityError on any mismatch."""
    started = time.perf_counter()
    enforce_offline()
    # Only matters for OpenMP builds of ONNX Runtime, and must be set before it is imported.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    onnx_file, tokenizer_file = verify(MINILM_ONNX), verify(MINILM_TOKENIZER)
    embedding = settings.embedding
    encoder = MiniLmEncoder.load(
        onnx_file.path,
        tokenizer_file.path,
        threads=embedding.threads,
        allow_spinning=embedding.allow_spinning,
        batch_size=embedding.batch_size,
        max_batch_tokens=embedding.run_tokens,
        cache_entries=embedding.cache_entries,
        tokenizer_tag=tokenizer_file.sha256,
    )
    bm25_terms = bm25_term_cache(embedding.cache_entries)
    files = [onnx_file, tokenizer_file]
    wordllama = None
    if settings.rerank.uses_wordllama:
        weights, tokenizer = verify(WORDLLAMA_WEIGHTS), verify(WORDLLAMA_TOKENIZER)
        wordllama = WordLlamaSimilarity.load(weights.path.parent.parent, embedding.cache_entries)
        files += [weights, tokenizer]
    e5 = None
    if settings.rerank.uses_e5:
        e5_file = verify(E5_MODEL)
        e5 = E5Similarity.load(e5_file.path, e5_file.sha256, threads=embedding.threads,
                               cache_entries=embedding.cache_entries)
        files.append(e5_file)
    models = LoadedModels(encoder, wordllama, tuple(files), time.perf_counter() - started, bm25_terms, e5)
    if embedding.cache_file:
        vector_file = Path(embedding.cache_file)
        loaded = {vector_file.name: encoder.cache.load(vector_file, onnx_file.sha256)}
        for path, cache in models.cache_files(vector_file).items():
            loaded[path.name] = cache.load(path)
        log.info("caches loaded from %s: %s", vector_file.parent, loaded)
    return models
