"""The int8-products embedding model: derived from the pinned file, pinned itself, kept once derived."""

from __future__ import annotations

import collections
from pathlib import Path

import pytest

from ragmesh_runtime import int8_products
from ragmesh_runtime.model_files import MINILM_ONNX, ModelIntegrityError, sha256_of, verify


@pytest.fixture(scope="module")
def source():
    return verify(MINILM_ONNX)


@pytest.fixture(scope="module")
def derived_once(source, tmp_path_factory) -> Path:
    return int8_products.load(source, tmp_path_factory.mktemp("models")).path


def test_the_derived_graph_multiplies_in_int8_but_for_one_product(derived_once: Path) -> None:
    import onnx

    def ops(model: Path) -> collections.Counter:
        return collections.Counter(node.op_type for node in onnx.load(str(model)).graph.node)

    original, derived = ops(MINILM_ONNX.path()), ops(derived_once)
    # 6 layers x 6 weight products; the first layer's feed-forward output stays a float32 MatMul.
    assert derived["MatMulInteger"] == 35 and derived["DynamicQuantizeLinear"] >= 1
    assert "MatMulInteger" not in original
    assert sha256_of(derived_once) == int8_products.SHA256


def test_a_kept_file_is_read_back_without_deriving_again(source, derived_once: Path, monkeypatch) -> None:
    def no_derivation(*args):
        raise AssertionError("derived again")

    monkeypatch.setattr(int8_products, "derive", no_derivation)
    again = int8_products.load(source, derived_once.parent)
    assert again.path == derived_once and again.sha256 == int8_products.SHA256


def test_a_kept_file_with_other_bytes_is_derived_again_and_replaced(source, derived_once: Path, tmp_path) -> None:
    folder = tmp_path / "models"
    folder.mkdir()
    tampered = folder / int8_products.FILE_NAME
    tampered.write_bytes(derived_once.read_bytes()[:-10] + b"0123456789")
    loaded = int8_products.load(source, folder)
    assert loaded.path == tampered and sha256_of(tampered) == int8_products.SHA256
    assert [p.name for p in folder.iterdir()] == [int8_products.FILE_NAME]  # no staging file left


def test_a_derivation_with_other_bytes_stops_the_start_and_keeps_nothing(source, tmp_path, monkeypatch) -> None:
    def other_bytes(model: Path, folder: Path) -> Path:
        out = folder / "int8-products.onnx"
        out.write_bytes(b"not the pinned model")
        return out

    monkeypatch.setattr(int8_products, "derive", other_bytes)
    with pytest.raises(ModelIntegrityError, match="refusing to start.*RAGMESH_RUNTIME_EMBED_PRODUCTS=float32"):
        int8_products.load(source, tmp_path / "models")
    assert not (tmp_path / "models").exists()


def test_a_folder_that_cannot_be_written_costs_a_derivation_not_the_start(source, tmp_path) -> None:
    folder = tmp_path / "not-a-folder"
    folder.write_bytes(b"")  # mkdir fails here even for root, as a read-only filesystem would
    loaded = int8_products.load(source, folder)
    assert folder.read_bytes() == b""
    assert loaded.path.parent != folder and sha256_of(loaded.path) == int8_products.SHA256


def test_the_cache_folder_is_the_setting_or_the_users_cache(monkeypatch, tmp_path) -> None:
    assert int8_products.cache_folder("/opt/ragmesh-models") == Path("/opt/ragmesh-models")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert int8_products.cache_folder("") == tmp_path / "ragmesh" / "models"


def test_a_copy_cut_short_by_a_full_disk_leaves_nothing_in_the_folder(source, derived_once: Path, tmp_path,
                                                                       monkeypatch) -> None:
    import errno
    import shutil

    copies: list[Path] = []
    copy = shutil.copyfile

    def full_disk_once(src, dst):
        copies.append(Path(dst))
        if len(copies) == 1:
            Path(dst).write_bytes(b"half a model")
            raise OSError(errno.ENOSPC, "No space left on device")
        return copy(src, dst)

    monkeypatch.setattr(int8_products.shutil, "copyfile", full_disk_once)
    folder = tmp_path / "models"
    loaded = int8_products.load(source, folder)
    assert list(folder.iterdir()) == []
    assert loaded.path.parent != folder and sha256_of(loaded.path) == int8_products.SHA256
