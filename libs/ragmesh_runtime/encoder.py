"""all-MiniLM-L6-v2 (int8 ONNX) as a sentence encoder: WordPiece ids in, unit vectors out.

Synchronous and CPU-bound by design: the service runs every call on its single inference thread,
which keeps ONNX Runtime's own thread pool the only parallelism and the event loop free.
"""

from __future__ import annotations

import contextlib
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_runtime.lru import LruCache
from ragmesh_runtime.pooling import l2_normalize, mean_pool
from ragmesh_runtime.text_features import TextFeatureCache


@dataclass(frozen=True, slots=True)
class Token:
    """TEI's SimpleToken: special tokens have no offsets into the text."""

    id: int
    text: str
    special: bool
    start: int | None
    stop: int | None


class MiniLmEncoder:
    dimension = 384
    # sentence-transformers' max_seq_length for this model (the position table allows 512, but
    # the model was trained on sequences of at most 256 tokens).
    max_input_tokens = 256

    def __init__(
        self, session, tokenizer, *, batch_size: int = 32, max_batch_tokens: int = 8192, cache_entries: int = 0,
        tokenizer_tag: str = "",
    ) -> None:
        self._session = session
        self.cache = SequenceVectorCache(cache_entries)
        # Token ids by text (ragmesh_runtime.text_features): 2 bytes per id for this vocabulary.
        self.token_cache = TextFeatureCache(cache_entries, "H" if tokenizer.get_vocab_size() <= 0xFFFF else "I",
                                            tag=f"wordpiece:{tokenizer_tag}")
        self._tokenizer = tokenizer
        self._batch_size = max(1, batch_size)
        self._max_batch_tokens = max(self.max_input_tokens, max_batch_tokens)
        self._cls = tokenizer.token_to_id("[CLS]")
        self._sep = tokenizer.token_to_id("[SEP]")
        self._input_names = {i.name for i in session.get_inputs()}
        # Pooled vectors of the current batched model pass (ragmesh_runtime.batching), by sequence.
        self._pass: dict[tuple[int, ...], np.ndarray] = {}

    @classmethod
    def load(
        cls,
        model_path: Path,
        tokenizer_path: Path,
        *,
        threads: int,
        allow_spinning: bool = False,
        batch_size: int = 32,
        max_batch_tokens: int = 8192,
        cache_entries: int = 0,
        tokenizer_tag: str = "",
    ) -> MiniLmEncoder:
        import onnxruntime
        from tokenizers import Tokenizer

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if allow_spinning else "0")
        session = onnxruntime.InferenceSession(
            str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
        )
        tokenizer = Tokenizer.from_file(str(tokenizer_path))
        # The shipped tokenizer.json pads and truncates to 128; this class does both itself.
        tokenizer.no_padding()
        tokenizer.no_truncation()
        return cls(session, tokenizer, batch_size=batch_size, max_batch_tokens=max_batch_tokens,
                   cache_entries=cache_entries, tokenizer_tag=tokenizer_tag)

    def token_ids(self, texts: Sequence[str]) -> list[Sequence[int]]:
        """WordPiece ids of each text, without [CLS]/[SEP] and without truncation."""
        return self.token_cache.fetch(texts, lambda missing: [
            e.ids for e in self._tokenizer.encode_batch(missing, add_special_tokens=False)])

    def tokens(self, text: str, add_special_tokens: bool = True) -> list[Token]:
        encoding = self._tokenizer.encode(text, add_special_tokens=add_special_tokens)
        return [
            Token(i, token, True, None, None) if special else Token(i, text[start:stop], False, start, stop)
            for i, token, (start, stop), special in zip(
                encoding.ids, encoding.tokens, encoding.offsets, encoding.special_tokens_mask)
        ]

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def check_ids(self, ids: Sequence[int], index: int) -> None:
        """Refuse ids this vocabulary does not have (TEI: a Tokenizer error, 422)."""
        size = self._tokenizer.get_vocab_size()
        bad = next((i for i in ids if not 0 <= i < size), None)
        if bad is not None:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"inputs[{index}] holds token id {bad}, outside the "
                               f"vocabulary (0..{size - 1})", {"error_type": "Tokenizer"})

    def sequence(self, content_ids: Sequence[int], max_tokens: int | None = None) -> list[int]:
        """[CLS] + ids + [SEP], the ids cut so that the whole sequence fits ``max_tokens``."""
        limit = (max_tokens or self.max_input_tokens) - 2
        return [self._cls, *content_ids[:limit], self._sep]

    def embed(self, texts: Sequence[str], normalize: bool = True) -> np.ndarray:
        """Vectors of ``texts``, each truncated to ``max_input_tokens``."""
        return self.embed_sequences([self.sequence(ids) for ids in self.token_ids(texts)], normalize)

    def embed_sequences(self, sequences: Sequence[Sequence[int]], normalize: bool = True) -> np.ndarray:
        """Vectors of ready id sequences (with specials), batched by length to keep padding small."""
        out = np.empty((len(sequences), self.dimension), dtype=np.float32)
        if not sequences:
            return out
        keys = [tuple(s) for s in sequences]
        todo = []
        for index, key in enumerate(keys):
            cached = self._pass.get(key)
            if cached is None:
                cached = self.cache.get(key)
            if cached is None:
                todo.append(index)
            else:
                out[index] = cached
        order = sorted(todo, key=lambda i: len(sequences[i]))
        for batch in self._batches(order, sequences):
            out[batch] = self._run([sequences[i] for i in batch])
            for index in batch:
                self.cache.put(keys[index], out[index].copy())
        return l2_normalize(out) if normalize else out

    def is_cached(self, sequence: Sequence[int]) -> bool:
        """Whether the vector cache holds this sequence (no hit or miss is counted)."""
        return tuple(sequence) in self.cache

    @contextlib.contextmanager
    def reusing(self, vectors: dict[tuple[int, ...], np.ndarray]) -> Iterator[None]:
        """Answer these pooled vectors (one batched pass over several requests) before the cache
        or the model, even with the cache off. Inference-thread only, like every other call."""
        self._pass = vectors
        try:
            yield
        finally:
            self._pass = {}

    def _batches(self, order: list[int], sequences: Sequence[Sequence[int]]) -> list[list[int]]:
        batches: list[list[int]] = []
        current: list[int] = []
        for index in order:  # ascending length: the newest member is the longest
            padded_cost = len(sequences[index]) * (len(current) + 1)
            if current and (len(current) >= self._batch_size or padded_cost > self._max_batch_tokens):
                batches.append(current)
                current = []
            current.append(index)
        if current:
            batches.append(current)
        return batches

    def _run(self, sequences: list[Sequence[int]]) -> np.ndarray:
        width = max(len(s) for s in sequences)
        input_ids = np.zeros((len(sequences), width), dtype=np.int64)
        attention_mask = np.zeros((len(sequences), width), dtype=np.int64)
        for row, ids in enumerate(sequences):
            input_ids[row, : len(ids)] = ids
            attention_mask[row, : len(ids)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": attention_mask}
        if "token_type_ids" in self._input_names:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = self._session.run(["last_hidden_state"], feeds)
        return mean_pool(hidden, attention_mask)


class SequenceVectorCache(LruCache[tuple[int, ...], np.ndarray]):
    """LRU of pooled (not yet normalised) vectors keyed by the full id sequence, specials included.

    The key is the exact model input, so a hit is the vector the model would compute again; the
    model never changes inside one process, so it needs no model id.
    """

    def save(self, path: Path, model_sha256: str) -> int:
        """Write every entry to ``path`` (npz, replaced atomically); returns the count."""
        entries = self.items()
        lengths = np.array([len(k) for k, _ in entries], dtype=np.int32)
        ids = np.array([i for k, _ in entries for i in k], dtype=np.int32)
        vectors = np.stack([v for _, v in entries]) if entries else np.empty((0, 0), np.float32)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial.npz")
        np.savez(partial, model=np.array(model_sha256), lengths=lengths, ids=ids, vectors=vectors)
        partial.replace(path)
        return len(entries)

    def load(self, path: Path, model_sha256: str) -> int:
        """Entries from a file written by ``save`` for the same model file; anything else is
        ignored (a cache is never worth refusing to start over). Returns how many were loaded."""
        try:
            with np.load(path, allow_pickle=False) as data:
                if str(data["model"]) != model_sha256:
                    return 0
                lengths, ids, vectors = data["lengths"], data["ids"], data["vectors"]
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):  # torn or foreign file
            return 0
        ends = np.cumsum(lengths)
        for row, (end, length) in enumerate(zip(ends, lengths)):
            self.put(tuple(int(i) for i in ids[end - length : end]), vectors[row])
        return len(lengths)
