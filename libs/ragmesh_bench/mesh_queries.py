"""The queries bench/mesh_overhead.py sends, and the runtime cache it starts from without them.

Here rather than in the script so that tests/unit/bench/test_mesh_overhead.py imports them as the
script does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ragmesh_bench.beir_dataset import load_beir
from ragmesh_bench.harness import say


def query_pool(folder: Path, split: str) -> list[str]:
    """Every distinct query text of the folder: the split's first, then the rest of queries.jsonl."""
    first = list(load_beir(folder, split).queries.values())
    with open(folder / "queries.jsonl", encoding="utf-8") as handle:
        rest = [json.loads(line)["text"] for line in handle if line.strip()]
    return list(dict.fromkeys(q for q in (t.strip() for t in first + rest) if q))


def query_sets(pool: list[str], per_pass: int, levels: int, warmup: int) -> tuple[list[list[str]], list[str]]:
    """Disjoint sets, one per concurrency level, and warm-up queries none of them holds."""
    fits = (len(pool) - warmup) // levels
    if fits < per_pass:
        say(f"{len(pool)} distinct queries: {fits} per pass, not {per_pass}, so every fresh pass is fresh")
        per_pass = fits
    if per_pass < 1:
        raise SystemExit(f"{len(pool)} distinct queries are too few for {levels} levels and {warmup} warm-up")
    return [pool[i * per_pass:(i + 1) * per_pass] for i in range(levels)], pool[len(pool) - warmup:]


def scrub_runtime_cache(source: Path, target: Path, queries: list[str]) -> dict:
    """Copy the runtime's vector cache (and its text feature caches) without the entries of ``queries``.

    The runtime keys each vector by the exact model input: [CLS] + WordPiece ids cut to 254 + [SEP],
    for /embed and for the query of /rerank alike (ragmesh_runtime.encoder)."""
    if not source.exists():
        return {"file": str(source), "entries": 0, "removed": 0}
    from tokenizers import Tokenizer

    from ragmesh_runtime.encoder import MiniLmEncoder
    from ragmesh_runtime.model_files import MINILM_TOKENIZER, verify
    from ragmesh_runtime.text_features import copy_without

    tokenizer = Tokenizer.from_file(str(verify(MINILM_TOKENIZER).path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    cls, sep = tokenizer.token_to_id("[CLS]"), tokenizer.token_to_id("[SEP]")
    limit = MiniLmEncoder.max_input_tokens - 2
    keys = {(cls, *e.ids[:limit], sep) for e in tokenizer.encode_batch(queries, add_special_tokens=False)}
    with np.load(source, allow_pickle=False) as data:
        model, lengths, ids, vectors = data["model"], data["lengths"], data["ids"], data["vectors"]
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    keep = np.array([tuple(int(i) for i in ids[s:s + n]) not in keys for s, n in zip(starts, lengths)],
                    dtype=bool)
    kept_ids = np.concatenate([ids[s:s + n] for s, n, k in zip(starts, lengths, keep) if k] or [ids[:0]])
    np.savez(target, model=model, lengths=lengths[keep], ids=kept_ids, vectors=vectors[keep])
    report = {"file": str(source), "entries": int(len(lengths)), "removed": int((~keep).sum())}
    # The text feature caches beside it (WordPiece ids, BM25 terms; ragmesh_runtime.text_features),
    # likewise without the queries, under the names the runtime derives from the vector file's.
    for suffix in (".wordpiece.npz", ".bm25-terms.npz"):
        entries, removed = copy_without(source.with_name(source.stem + suffix),
                                        target.with_name(target.stem + suffix), queries)
        report[suffix.strip(".").removesuffix(".npz")] = {"entries": entries, "removed": removed}
    return report
