"""TextFeatureCache: integer features by text digest, kept across restarts only for the same tag."""

from __future__ import annotations

from array import array
from pathlib import Path

from ragmesh_runtime.text_features import TextFeatureCache, copy_without, text_key


def test_features_survive_a_save_and_load(tmp_path: Path) -> None:
    cache = TextFeatureCache(10, "q", tag="bm25-terms:v1")
    cache.put(text_key("alpha beta"), array("q", [7, -3, 2**40]))
    cache.put(text_key("空"), array("q"))
    assert cache.save(tmp_path / "f.npz") == 2

    again = TextFeatureCache(10, "q", tag="bm25-terms:v1")
    assert again.load(tmp_path / "f.npz") == 2
    keys, found = again.lookup(["alpha beta", "空", "unseen"])
    assert [list(v) if v is not None else None for v in found] == [[7, -3, 2**40], [], None]
    assert keys[0] == text_key("alpha beta") and len(keys[0]) == 16


def test_a_file_for_another_tag_or_type_is_ignored(tmp_path: Path) -> None:
    cache = TextFeatureCache(10, "H", tag="wordpiece:abc")
    cache.put(text_key("x"), array("H", [101, 102]))
    cache.save(tmp_path / "f.npz")
    assert TextFeatureCache(10, "H", tag="wordpiece:other").load(tmp_path / "f.npz") == 0
    assert TextFeatureCache(10, "I", tag="wordpiece:abc").load(tmp_path / "f.npz") == 0
    assert TextFeatureCache(10, "H", tag="wordpiece:abc").load(tmp_path / "missing.npz") == 0
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    assert TextFeatureCache(10, "H", tag="wordpiece:abc").load(tmp_path / "bad.npz") == 0


def test_a_copy_leaves_out_the_texts_asked(tmp_path: Path) -> None:
    cache = TextFeatureCache(10, "q", tag="t")
    for text, values in (("keep", [1, 2]), ("drop", [3]), ("also kept", [4, 5, 6])):
        cache.put(text_key(text), array("q", values))
    cache.save(tmp_path / "f.npz")
    assert copy_without(tmp_path / "f.npz", tmp_path / "g.npz", ["drop", "never stored"]) == (3, 1)
    copied = TextFeatureCache(10, "q", tag="t")
    assert copied.load(tmp_path / "g.npz") == 2
    _, found = copied.lookup(["keep", "drop", "also kept"])
    assert [list(v) if v is not None else None for v in found] == [[1, 2], None, [4, 5, 6]]
    assert copy_without(tmp_path / "missing.npz", tmp_path / "h.npz", ["x"]) == (0, 0)


def test_fetch_computes_only_what_is_missing_in_one_call() -> None:
    cache = TextFeatureCache(10, "q", tag="t")
    calls: list[list[str]] = []

    def lengths(texts: list[str]) -> list[list[int]]:
        calls.append(texts)
        return [[len(t)] for t in texts]

    assert [list(v) for v in cache.fetch(["ab", "c"], lengths)] == [[2], [1]]
    assert [list(v) for v in cache.fetch(["c", "def", "ab"], lengths)] == [[1], [3], [2]]
    assert calls == [["ab", "c"], ["def"]]
