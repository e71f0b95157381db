"""Load the runtime's models once, from verified files inside installed packages."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from dataclasses import dataclass

from ragmesh_runtime import int8_products
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
class EmbeddingModel:
    """What /info says of the embedding model: TEI's model_id and model_sha, and how it multiplies."""

    model_id: str
    sha256: str  # of the file the session runs
    products: str  # RAGMESH_RUNTIME_EMBED_PRODUCTS
    quantization: str
    # int8 products quantize each product's input with one scale per ONNX run, taken over every row
    # of the run: a text's vector would depend on the texts that share its run. One sequence per run
    # keeps a vector a function of its own tokens (what the vector cache and TEI's clients assume).
    one_sequence_per_run: bool = False


FLOAT32_PRODUCTS = EmbeddingModel(
    model_id="all-MiniLM-L6-v2-onnx-int8", sha256=MINILM_ONNX.sha256, products="float32",
    quantization="int8 weights with scales, cast to float32 in the graph (weight-only; activations are "
                 "float32): close to, not equal to, the fp32 model's vectors")
INT8_PRODUCTS = EmbeddingModel(
    model_id="all-MiniLM-L6-v2-onnx-int8-products", sha256=int8_products.SHA256, products="int8",
    quantization="the same int8 weights multiplied in int8 (per output channel; each product's input "
                 "quantized per call; the first layer's feed-forward output kept in float32): close to, "
                 "not equal to, the fp32 model's vectors", one_sequence_per_run=True)


@dataclass(frozen=True)
class LoadedModels:
    encoder: MiniLmEncoder
    wordllama: WordLlamaSimilarity | None
    files: tuple[VerifiedFile, ...]
    load_seconds: float
    bm25_terms: TextFeatureCache | None = None  # request BM25's term ids by text
    e5: E5Similarity | None = None  # the reranker's signal for Chinese queries
    embedding: EmbeddingModel = FLOAT32_PRODUCTS

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
    model = INT8_PRODUCTS if embedding.products == "int8" else FLOAT32_PRODUCTS
    files = [onnx_file, tokenizer_file]
    if model is INT8_PRODUCTS:
        onnx_file = int8_products.load(onnx_file, int8_products.cache_folder(embedding.model_cache))
        files.insert(1, onnx_file)
    encoder = MiniLmEncoder.load(
        onnx_file.path,
        tokenizer_file.path,
        threads=embedding.threads,
        allow_spinning=embedding.allow_spinning,
        batch_size=1 if model.one_sequence_per_run else embedding.batch_size,
        max_batch_tokens=embedding.run_tokens,
        cache_entries=embedding.cache_entries,
        tokenizer_tag=tokenizer_file.sha256,
    )
    bm25_terms = bm25_term_cache(embedding.cache_entries)
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
    models = LoadedModels(encoder, wordllama, tuple(files), time.perf_counter() - started, bm25_terms, e5, model)
    if embedding.cache_file:
        vector_file = Path(embedding.cache_file)
        loaded = {vector_file.name: encoder.cache.load(vector_file, model.sha256)}
        for path, cache in models.cache_files(vector_file).items():
            loaded[path.name] = cache.load(path)
        log.info("caches loaded from %s: %s", vector_file.parent, loaded)
    return models
