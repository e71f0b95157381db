"""The embedding model with int8 matrix products, made from the pinned ONNX file and pinned itself.

The shipped all-MiniLM-L6-v2 file stores int8 weights, but its graph casts them to float32 at load,
so every product of a pass is a float32 one. Here ONNX Runtime first folds those casts into float32
weights (its basic graph optimizations, written out), then ``onnxruntime.quantization.quantize_dynamic``
turns each weight product into an int8 one (``MatMulInteger``: int8 weights per output channel, the
input quantized per call). One product stays float32: the first layer's feed-forward output, whose
input (the GELU of the first layer) is where quantizing costs the most closeness to the float model
(bench/embedder_compat.py; docs/runtime.md, "Model identity").

The derivation is deterministic for the pinned onnx and onnxruntime versions: its output is pinned by
sha256 like any weights file, checked after every derivation and every time it is read back from the
cache folder, and the runtime refuses to start on any other bytes. Nothing is fetched.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path

from ragmesh_runtime.model_files import ModelIntegrityError, VerifiedFile, sha256_of

log = logging.getLogger("ragmesh_runtime")

SHA256 = "607cb9c21968df569afcd22137894cba956e46809d0db77edca38cf5535c16e6"
FILE_NAME = f"all-MiniLM-L6-v2-int8-products-{SHA256[:16]}.onnx"
ROLE = "embedding model (all-MiniLM-L6-v2, int8 products, derived from the int8 ONNX file)"
# The feed-forward output weights of a MiniLM layer: 1536 rows in, 384 out.
_FFN_OUTPUT_SHAPE = (1536, 384)


def derive(source: Path, folder: Path) -> Path:
    """Write ``source`` with int8 products into ``folder``; returns the new file's path."""
    import onnx
    import onnxruntime
    from onnxruntime.quantization import QuantType, quantize_dynamic

    folded, quantized = folder / "folded.onnx", folder / "int8-products.onnx"
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.optimized_model_filepath = str(folded)
    onnxruntime.InferenceSession(str(source), sess_options=options, providers=["CPUExecutionProvider"])
    graph = onnx.load(str(folded)).graph
    shapes = {init.name: tuple(init.dims) for init in graph.initializer}
    ffn_outputs = [node.name for node in graph.node if node.op_type == "MatMul"
                   and any(shapes.get(name) == _FFN_OUTPUT_SHAPE for name in node.input)]
    if len(ffn_outputs) != 6:
        raise ModelIntegrityError(f"{ROLE}: expected 6 feed-forward output products in {source}, "
                                  f"found {len(ffn_outputs)}")
    root = logging.getLogger()
    root.addFilter(_no_preprocessing_hint)  # quantize_dynamic advises shape inference for CNNs, on root
    try:
        quantize_dynamic(str(folded), str(quantized), weight_type=QuantType.QInt8, per_channel=True,
                         nodes_to_exclude=ffn_outputs[:1])
    finally:
        root.removeFilter(_no_preprocessing_hint)
    return quantized


def _no_preprocessing_hint(record: logging.LogRecord) -> bool:
    return "pre-processing before quantization" not in record.getMessage()


def cache_folder(configured: str = "") -> Path:
    """``configured`` (RAGMESH_RUNTIME_MODEL_CACHE), else ``$XDG_CACHE_HOME/ragmesh/models``
    (``~/.cache/ragmesh/models``): shared by every runtime of the user, so one derivation serves them."""
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ragmesh" / "models"


def load(source: VerifiedFile, folder: Path) -> VerifiedFile:
    """The int8-products model beside ``source`` (a verified MINILM_ONNX): read from ``folder`` when
    a file with the pinned bytes is there, else derived (a few seconds) and kept there for the next
    start. A folder that cannot be written only costs the derivation at every start."""
    cached = folder / FILE_NAME
    if cached.is_file():
        actual = sha256_of(cached)
        if actual == SHA256:
            return _verified(source, cached)
        log.warning("derived model %s has sha256 %s, expected %s; deriving it again", cached, actual, SHA256)
    with tempfile.TemporaryDirectory(prefix="ragmesh-int8-products-") as scratch:
        derived = derive(source.path, Path(scratch))
        actual = sha256_of(derived)
        if actual != SHA256:
            raise ModelIntegrityError(
                f"{ROLE}: derived sha256 {actual}, expected {SHA256} (onnx or onnxruntime is not the "
                "version in requirements.lock?); refusing to start. RAGMESH_RUNTIME_EMBED_PRODUCTS=float32 "
                "serves the shipped file as it is")
        staged = folder / f".{FILE_NAME}.{os.getpid()}"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(derived, staged)
            os.replace(staged, cached)  # atomic: a runtime starting beside this one reads all or nothing
            return _verified(source, cached)
        except OSError as exc:
            if staged.parent.is_dir():
                staged.unlink(missing_ok=True)  # a copy cut short (a full disk) leaves nothing behind
            log.warning("derived model not kept in %s (%s); it is derived again at every start", folder, exc)
            kept = Path(tempfile.mkdtemp(prefix="ragmesh-int8-products-")) / FILE_NAME
            shutil.copyfile(derived, kept)
            return _verified(source, kept)


def _verified(source: VerifiedFile, path: Path) -> VerifiedFile:
    return VerifiedFile(role=ROLE, distribution=source.distribution,
                        distribution_version=source.distribution_version, path=path, sha256=SHA256,
                        size_bytes=path.stat().st_size)


# Derive into the cache folder now (before a first start): python -m ragmesh_runtime.int8_products
if __name__ == "__main__":
    from ragmesh_runtime.model_files import MINILM_ONNX, verify
    from ragmesh_runtime.settings import EmbeddingSettings

    print(load(verify(MINILM_ONNX), cache_folder(EmbeddingSettings.from_env().model_cache)).path)
