"""Per-text features the rerank path would otherwise recompute (MiniLM WordPiece ids, BM25 term
ids, multilingual-e5 passage vectors), keyed by a 16-byte BLAKE2b digest of the text.

A reranked chunk recurs across queries, and with its vector cached, reading its text is the cost
left: WordPiece and BM25 tokenizing of 50 candidates take tens of milliseconds on 2 cores. /embed
fills the WordPiece cache, so chunks the indexer embedded are cheap to rerank from the first
query on; ``save``/``load`` keep both across restarts next to the vector cache file.
"""

from __future__ import annotations

import hashlib
from array import array
import zipfile
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

from ragmesh_runtime.lru import LruCache

DIGEST_BYTES = 16


def text_key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=DIGEST_BYTES).digest()


class TextFeatureCache(LruCache[bytes, array]):
    """LRU of ``array(typecode)`` values by text digest; ``tag`` names what produced them (a model
    file's hash, a tokenizer config) so a file written for something else is ignored on load."""

    def __init__(self, max_entries: int, typecode: str, tag: str) -> None:
        super().__init__(max_entries)
        self.typecode = typecode
        self.tag = tag
        self._dtype = np.float32 if typecode == "f" else np.int64  # how the values are written

    def lookup(self, texts: Sequence[str]) -> tuple[list[bytes], list[array | None]]:
        keys = [text_key(t) for t in texts]
        return keys, [self.get(k) for k in keys]

    def fetch(self, texts: Sequence[str], compute: Callable[[list[str]], Iterable[Iterable]]) -> list[array]:
        """Each text's features: from the cache, else from one ``compute`` call over all the texts
        it lacks (one value sequence per text, in order), which are then kept."""
        keys, found = self.lookup(texts)
        todo = [i for i, values in enumerate(found) if values is None]
        if todo:
            for index, values in zip(todo, compute([texts[i] for i in todo]), strict=True):
                found[index] = array(self.typecode, values)
                self.put(keys[index], found[index])
        return found  # type: ignore[return-value]

    def save(self, path: Path) -> int:
        """Every entry to ``path`` (npz, replaced atomically); returns the count."""
        entries = self.items()
        keys = np.frombuffer(b"".join(k for k, _ in entries), dtype=np.uint8).reshape(-1, DIGEST_BYTES)
        lengths = np.array([len(v) for _, v in entries], dtype=np.int64)
        values = np.array(list(_chain(v for _, v in entries)), dtype=self._dtype)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial.npz")
        np.savez(partial, tag=np.array(self.tag), typecode=np.array(self.typecode), keys=keys,
                 lengths=lengths, values=values)
        partial.replace(path)
        return len(entries)

    def load(self, path: Path) -> int:
        """Entries of a file ``save`` wrote with the same tag and typecode; anything else is ignored
        (a cache is never worth refusing to start over). Returns how many were loaded."""
        try:
            with np.load(path, allow_pickle=False) as data:
                if str(data["tag"]) != self.tag or str(data["typecode"]) != self.typecode:
                    return 0
                keys, lengths, values = data["keys"], data["lengths"], data["values"]
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):  # torn or foreign file
            return 0
        ends = np.cumsum(lengths)
        for row, (end, length) in enumerate(zip(ends, lengths)):
            self.put(keys[row].tobytes(), array(self.typecode, values[end - length : end].tolist()))
        return len(lengths)


def _chain(arrays: Iterable[array]) -> Iterable[int]:
    for values in arrays:
        yield from values


def copy_without(source: Path, target: Path, texts: Iterable[str]) -> tuple[int, int]:
    """Copy a file ``save`` wrote, leaving out the entries of ``texts`` (a benchmark that must see
    some texts fresh). Returns (entries in the source, entries left out); no source, no copy."""
    if not source.exists():
        return 0, 0
    drop = {text_key(t) for t in texts}
    with np.load(source, allow_pickle=False) as data:
        saved = {name: data[name] for name in data.files}
    keys, lengths, values = saved["keys"], saved["lengths"], saved["values"]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    keep = np.array([row.tobytes() not in drop for row in keys], dtype=bool)
    kept_values = [values[s : s + n] for s, n, k in zip(starts, lengths, keep) if k]
    np.savez(target, tag=saved["tag"], typecode=saved["typecode"], keys=keys[keep], lengths=lengths[keep],
             values=np.concatenate(kept_values) if kept_values else values[:0])
    return int(len(keys)), int((~keep).sum())
