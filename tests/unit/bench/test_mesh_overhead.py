"""bench/mesh_overhead.py's query sets and its copy of the runtime's vector cache (no processes started)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

from mesh_overhead import query_pool, query_sets, scrub_runtime_cache  # noqa: E402

from ragmesh_runtime.encoder import MiniLmEncoder, SequenceVectorCache  # noqa: E402
from ragmesh_runtime.model_files import MINILM_TOKENIZER, verify  # noqa: E402


class _NoSession:
    def get_inputs(self) -> list:
        return []


@pytest.fixture
def encoder() -> MiniLmEncoder:
    """The runtime's own encoder, for its cache keys only (no model is loaded)."""
    tokenizer = Tokenizer.from_file(str(verify(MINILM_TOKENIZER).path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return MiniLmEncoder(_NoSession(), tokenizer, cache_entries=10)


def runtime_key(encoder: MiniLmEncoder, text: str) -> tuple[int, ...]:
    return tuple(encoder.sequence(encoder.token_ids([text])[0]))


def test_pool_puts_the_split_first_and_drops_repeats(tmp_path: Path) -> None:
    queries = [("q1", "train one"), ("q2", "test one"), ("q3", "train one"), ("q4", "test two"), ("q5", " ")]
    lines = [json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries]
    (tmp_path / "queries.jsonl").write_text("".join(lines))
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"_id": "d", "title": "", "text": "x"}) + "\n")
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td\t1\nq4\td\t1\n")

    assert query_pool(tmp_path, "test") == ["test one", "test two", "train one"]


def test_sets_are_disjoint_and_shrink_rather_than_repeat_a_query() -> None:
    pool = [f"q{i}" for i in range(25)]

    sets, warmup = query_sets(pool, 10, 2, 3)
    assert [len(s) for s in sets] == [10, 10] and len(warmup) == 3
    assert len(set(sets[0]) | set(sets[1]) | set(warmup)) == 23

    sets, warmup = query_sets(pool, 20, 2, 3)
    assert [len(s) for s in sets] == [11, 11]
    assert len(set(sets[0]) | set(sets[1]) | set(warmup)) == 25


def test_cache_copy_loses_exactly_the_queries_vectors(tmp_path: Path, encoder: MiniLmEncoder) -> None:
    cache = SequenceVectorCache(10)
    asked, other = "Does vitamin D raise bone density?", "Vitamin D\nBone density rises with vitamin D."
    cache.put(runtime_key(encoder, asked), np.ones(4, dtype=np.float32))
    cache.put(runtime_key(encoder, other), np.full(4, 2.0, dtype=np.float32))
    cache.save(tmp_path / "cache.npz", "sha")

    report = scrub_runtime_cache(tmp_path / "cache.npz", tmp_path / "copy.npz", [asked])

    copied = SequenceVectorCache(10)
    assert copied.load(tmp_path / "copy.npz", "sha") == 1
    assert copied.get(runtime_key(encoder, asked)) is None
    assert copied.get(runtime_key(encoder, other)).tolist() == [2.0] * 4
    assert report["entries"] == 2 and report["removed"] == 1


def test_no_cache_file_means_an_empty_cache(tmp_path: Path) -> None:
    report = scrub_runtime_cache(tmp_path / "missing.npz", tmp_path / "copy.npz", ["q"])
    assert report["removed"] == 0 and not (tmp_path / "copy.npz").exists()
