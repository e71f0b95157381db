"""The runtime's application service: input limits, admission, and model work off the event loop.

HTTP routes translate wire formats and call this; it knows nothing about HTTP. Every model call
runs on one dedicated thread: ONNX Runtime already spreads a batch over all cores, so a second
inference thread would only make two batches fight for them. /embed and /rerank requests that
are in flight together share model passes (ragmesh_runtime.batching).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from dataclasses import dataclass
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence, TypeVar

import numpy as np

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.telemetry import query_hash
from ragmesh_runtime.batching import BatchObserver, DynamicBatcher, Priority, Sequences
from ragmesh_runtime.generator.extractive import ExtractiveAnswer, ExtractiveAnswerer
from ragmesh_runtime.generator.prompt_protocol import ChatTurn, parse_evidence_prompt
from ragmesh_runtime.encoder import Token
from ragmesh_runtime.models import LoadedModels
from ragmesh_runtime.pooling import l2_normalize
from ragmesh_runtime.relevance import Planned, RelevanceScorer, build_scorer
from ragmesh_runtime.settings import RuntimeSettings

log = logging.getLogger("ragmesh_runtime")
T = TypeVar("T")


# One model input: a text, or token ids with their special tokens (TEI's InputType).
EmbedInput = str | list[int]


@dataclass(frozen=True, slots=True)
class Embeddings:
    vectors: np.ndarray
    tokens: int  # model input tokens, specials included (what TEI reports as prompt_tokens)


class InferenceExecutor:
    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ragmesh-inference")

    async def run(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args))

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


class RuntimeService:
    def __init__(
        self,
        models: LoadedModels,
        settings: RuntimeSettings,
        executor: InferenceExecutor | None = None,
        scorer: RelevanceScorer | None = None,
        observe_batch: BatchObserver | None = None,
    ) -> None:
        self.models = models
        self.settings = settings
        self.executor = executor or InferenceExecutor()
        self.scorer = scorer or build_scorer(settings.rerank, models.encoder, models.wordllama, models.bm25_terms,
                                             models.e5)
        self.batcher = DynamicBatcher(
            models.encoder, self.executor, max_batch_tokens=settings.embedding.max_batch_tokens,
            max_batch_requests=settings.embedding.max_batch_requests, observe=observe_batch,
            bulk_slice_tokens=settings.embedding.bulk_slice_tokens,
        )
        self.answerer = ExtractiveAnswerer(models.encoder, settings.generator)
        self._in_flight = 0
        self.started_at = time.time()
        self._saved_writes: dict[Path, int] = {path: cache.writes for path, cache in self._caches().items()}

    # -- embeddings -------------------------------------------------------------------------
    async def embed(
        self,
        inputs: Sequence[EmbedInput],
        normalize: bool,
        truncate: bool | None,
        truncate_left: bool = False,
        dimensions: int | None = None,
        priority: Priority = Priority.INTERACTIVE,
    ) -> Embeddings:
        """Vectors of texts or token-id sequences, as TEI computes them: ``dimensions`` keeps the
        first components (then normalizes when asked); token ids are the model input as given.
        ``priority``: bulk work (an index build) waits behind queued interactive requests."""
        self._check_inputs(inputs)
        if dimensions is not None and not 1 <= dimensions <= self.models.encoder.dimension:
            reason = "positive" if dimensions < 1 else "smaller than the maximum embedding dimension"
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"`dimensions` should be {reason}.")
        truncate = self._truncate(truncate)
        inputs = list(inputs)
        with self._admitted():
            return await self.batcher.submit(
                functools.partial(self._model_inputs, inputs, truncate, truncate_left),
                functools.partial(self._embedded, inputs, normalize, dimensions), priority)

    def _model_inputs(self, inputs: list[EmbedInput], truncate: bool, truncate_left: bool) -> Sequences:
        """Each input as the model sequence it becomes, or the error TEI gives when it cannot."""
        encoder = self.models.encoder
        limit = encoder.max_input_tokens
        texts = [i for i in inputs if isinstance(i, str)]
        text_ids = iter(encoder.token_ids(texts))
        sequences = []
        for index, item in enumerate(inputs):
            if isinstance(item, str):  # [CLS] + the text's ids + [SEP]
                ids = next(text_ids)
                sequence = encoder.sequence(self._fitted(ids, limit - 2, len(ids) + 2, limit, truncate, truncate_left, index))
            else:  # ids are the model input as given, special tokens included (as in TEI)
                encoder.check_ids(item, index)
                sequence = list(self._fitted(item, limit, len(item), limit, truncate, truncate_left, index))
            sequences.append(sequence)
        return sequences

    def _embedded(
        self, inputs: list[EmbedInput], normalize: bool, dimensions: int | None, sequences: Sequences
    ) -> Embeddings:
        vectors = self.models.encoder.embed_sequences(sequences, normalize=normalize and dimensions is None)
        if dimensions is not None:
            vectors = vectors[:, :dimensions]
            vectors = l2_normalize(vectors) if normalize else vectors
        # A text embedded now (a chunk, at index time) is reranked later: read it for the reranker
        # too while it is at hand (WordPiece ids are already cached by token_ids).
        self.scorer.prepare([i for i in inputs if isinstance(i, str)])
        return Embeddings(vectors=vectors, tokens=sum(len(s) for s in sequences))

    @staticmethod
    def _fitted(
        ids: Sequence[int], room: int, given: int, limit: int, truncate: bool, truncate_left: bool, index: int
    ) -> Sequence[int]:
        """``ids`` cut to ``room`` when truncating, else refused when they do not fit."""
        if len(ids) <= room:
            return ids
        if not truncate:
            raise RagmeshError(
                ErrorCode.QUERY_TOO_LONG,
                f"inputs[{index}] must have at most {limit} tokens; given {given} (set truncate=true to cut it)",
            )
        return ids[len(ids) - room:] if truncate_left else ids[:room]

    # -- tokenizer --------------------------------------------------------------------------
    async def tokenize(self, texts: Sequence[str], add_special_tokens: bool) -> list[list[Token]]:
        self._check_texts(texts, "inputs")
        return [self.models.encoder.tokens(text, add_special_tokens) for text in texts]

    async def decode(self, sequences: Sequence[Sequence[int]], skip_special_tokens: bool) -> list[str]:
        if not sequences or any(not ids for ids in sequences):
            raise RagmeshError(ErrorCode.QUERY_EMPTY, "`input_ids` cannot be empty")
        if len(sequences) > self.settings.embedding.max_client_batch_size:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"batch size {len(sequences)} > maximum allowed "
                               f"batch size {self.settings.embedding.max_client_batch_size}")
        encoder = self.models.encoder
        for index, ids in enumerate(sequences):
            encoder.check_ids(ids, index)
        return [encoder.decode(ids, skip_special_tokens) for ids in sequences]

    # -- rerank -----------------------------------------------------------------------------
    async def rerank(
        self, query: str, texts: Sequence[str], truncate: bool | None,
        priority: Priority = Priority.INTERACTIVE,
    ) -> np.ndarray:
        """Raw relevance of each text to the query (cosine-like, see the scorer's description)."""
        if not query:
            raise RagmeshError(ErrorCode.QUERY_EMPTY, "`query` cannot be empty")
        self._check_texts([query], "query")
        self._check_texts(texts, "texts", max_count=self.settings.rerank.max_texts)
        truncate = self._truncate(truncate)
        texts = list(texts)
        plan: list[Planned] = []  # worked out once, on the inference thread, before the pass

        def sequences() -> list[list[int]]:
            plan.append(self.scorer.planned(query, texts, truncate))
            return plan[0].sequences

        with self._admitted():
            return await self.batcher.submit(sequences, lambda _: plan[0].score(), priority)

    # -- extractive answers -----------------------------------------------------------------
    async def answer(self, turns: Sequence[ChatTurn]) -> ExtractiveAnswer:
        prompt_chars = sum(len(turn.content) for turn in turns)
        limit = self.settings.generator.max_prompt_chars
        if prompt_chars > limit:
            raise RagmeshError(
                ErrorCode.BODY_TOO_LARGE, f"messages hold {prompt_chars} characters; at most {limit}"
            )
        prompt = parse_evidence_prompt(turns)
        with self._admitted():
            # An interactive job of the batcher (it plans no sequences: the answerer embeds its own),
            # so a chat is served between the slices of an index build's pass, as a search is.
            answer = await self.batcher.submit(lambda: [], lambda _: self.answerer.answer(prompt))
        log.info(
            "extractive answer question_sha256=%s sources=%d best_score=%s sufficient=%s",
            query_hash(prompt.question),
            len(prompt.sources),
            "none" if answer.best_score is None else f"{answer.best_score:.3f}",
            answer.sufficient,
        )
        return answer

    # -- health -----------------------------------------------------------------------------
    async def check_health(self) -> None:
        """Run the model once: "loaded" is only true if inference actually works."""
        try:
            vectors = await self.executor.run(self.models.encoder.embed, ["health"], True)
        except RuntimeError as exc:  # executor shut down: the process is stopping
            raise RagmeshError(ErrorCode.UNAVAILABLE, "runtime is shutting down") from exc
        if vectors.shape != (1, self.models.encoder.dimension) or not np.isfinite(vectors).all():
            raise RagmeshError(ErrorCode.UNAVAILABLE, "embedding model returned an invalid vector")

    # -- limits -----------------------------------------------------------------------------
    def _truncate(self, requested: bool | None) -> bool:
        return self.settings.embedding.auto_truncate if requested is None else requested

    def _check_inputs(self, inputs: Sequence[EmbedInput]) -> None:
        """TEI's order: an empty batch or an empty input is Empty (400), then the limits."""
        if not inputs or any(len(item) == 0 for item in inputs):
            raise RagmeshError(ErrorCode.QUERY_EMPTY, "`inputs` cannot be empty")
        self._check_texts([i for i in inputs if isinstance(i, str)], "inputs", count=len(inputs))

    def _check_texts(
        self, texts: Sequence[str], field: str, max_count: int | None = None, count: int | None = None
    ) -> None:
        limits = self.settings.embedding
        max_count = max_count or limits.max_client_batch_size
        count = len(texts) if count is None else count
        if not count:
            raise RagmeshError(ErrorCode.QUERY_EMPTY, f"`{field}` cannot be empty")
        if count > max_count:
            # TEI's router answers these Validation 422 (its OpenAPI document says 413 for them).
            raise RagmeshError(
                ErrorCode.INVALID_ARGUMENT,
                f"batch size {count} > maximum allowed batch size {max_count}",
            )
        for index, text in enumerate(texts):
            if len(text) > limits.max_input_chars:
                raise RagmeshError(
                    ErrorCode.INVALID_ARGUMENT,
                    f"{field}[{index}] has {len(text)} characters; at most {limits.max_input_chars}",
                )

    @contextlib.contextmanager
    def _admitted(self) -> Iterator[None]:
        if self._in_flight >= self.settings.server.max_concurrent_requests:
            raise RagmeshError(ErrorCode.RATE_LIMITED, "Model is overloaded")
        self._in_flight += 1
        try:
            yield
        finally:
            self._in_flight -= 1

    # -- caches on disk ---------------------------------------------------------------------
    def _caches(self) -> dict[Path, Any]:
        cache_file = self.settings.embedding.cache_file
        if not cache_file:
            return {}
        return {Path(cache_file): self.models.encoder.cache, **self.models.cache_files(Path(cache_file))}

    def save_caches(self, *, only_changed: bool = False) -> dict[str, int]:
        """Write the caches beside the cache file; runs on the inference thread (the LRUs are not
        locked). ``only_changed``: skip a cache with no new entry since its last save."""
        saved: dict[str, int] = {}
        for path, cache in self._caches().items():
            if only_changed and self._saved_writes.get(path) == cache.writes:
                continue
            writes = cache.writes
            if cache is self.models.encoder.cache:
                saved[path.name] = cache.save(path, self.models.embedding.sha256)
            else:
                saved[path.name] = cache.save(path)
            self._saved_writes[path] = writes
        return saved

    async def keep_caches_saved(self) -> None:
        """Save changed caches every interval, so a runtime that is killed restarts warm."""
        interval = self.settings.embedding.cache_save_interval_s
        if interval <= 0 or not self._caches():
            return
        while True:
            await asyncio.sleep(interval)
            try:
                saved = await self.executor.run(functools.partial(self.save_caches, only_changed=True))
            except RuntimeError:  # the executor shut down: the process is stopping
                return
            except OSError as exc:  # a full disk must not stop the runtime; the next round retries
                log.warning("caches not saved: %s", exc.strerror)
                continue
            if saved:
                log.info("caches saved: %s", saved)

    def close(self) -> None:
        self.executor.shutdown()
        if self._caches():
            log.info("caches saved at shutdown: %s", self.save_caches())
