import hashlib

import pytest

from ragmesh_runtime.model_files import (
    MINILM_ONNX,
    MINILM_TOKENIZER,
    ModelIntegrityError,
    PinnedFile,
    enforce_offline,
    verify,
)


def pinned(path, sha256):
    return PinnedFile(
        role="test model", distribution="ragmesh", relative_path=path.name, sha256=sha256, locate=lambda: path
    )


def test_matching_hash_is_verified(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"weights")
    verified = verify(pinned(path, hashlib.sha256(b"weights").hexdigest()))
    assert verified.sha256 == hashlib.sha256(b"weights").hexdigest()
    assert verified.size_bytes == 7
    assert verified.describe()["sha256_verified"] is True


def test_mismatched_hash_refuses_to_start(tmp_path):
    path = tmp_path / "weights.bin"
    path.write_bytes(b"tampered")
    with pytest.raises(ModelIntegrityError) as caught:
        verify(pinned(path, hashlib.sha256(b"weights").hexdigest()))
    assert "refusing to start" in caught.value.message
    assert isinstance(caught.value, SystemExit)


def test_missing_file_refuses_to_start(tmp_path):
    with pytest.raises(ModelIntegrityError):
        verify(pinned(tmp_path / "absent.bin", "0" * 64))


def test_shipped_model_files_match_their_pins():
    assert verify(MINILM_ONNX).size_bytes > 20_000_000
    assert verify(MINILM_TOKENIZER).path.name == "tokenizer.json"


def test_offline_guards_are_set(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    enforce_offline()
    import os

    assert os.environ["HF_HUB_OFFLINE"] == "1"
    assert os.environ["TRANSFORMERS_OFFLINE"] == "1"
