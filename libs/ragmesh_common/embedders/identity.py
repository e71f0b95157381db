"""An embedder's identity in the terms of TEI's /info, read the same way from TEI and the CPU runtime.

TEI reports ``model_id`` (a hub repo, or the path it loaded: in the GPU profile a Hugging Face cache
snapshot, ``/models/models--ORG--NAME/snapshots/COMMIT``), ``model_sha`` (the hub revision, null for
a path), ``model_dtype`` and ``model_type.embedding.pooling``. The CPU runtime reports the same
fields (its ``model_sha`` is the sha256 of its int8 ONNX file, which has no hub revision) and says in
``ragmesh.embedder`` what TEI's fields cannot: the weights format and the dimension.

An index records the identity of the embedder that made its vectors (index_schema.CollectionMeta);
retrieval compares it with the one serving queries (embedders.compatibility).
"""

from __future__ import annotations

import re
from typing import Any

import msgspec

# Hugging Face's cache layout: models--{repo id with "/" as "--"}/snapshots/{40-hex commit}.
_SNAPSHOT = re.compile(r"(?:^|/)models--(?P<repo>[^/]+)/snapshots/(?P<commit>[0-9a-f]{40})/?$")


class EmbedderIdentity(msgspec.Struct, frozen=True, forbid_unknown_fields=False, omit_defaults=True):
    """Everything that decides a vector: two embedders with equal identities make the same vectors."""

    model: str  # TEI's model_id, a snapshot path read back as its repo id
    revision: str = ""  # hub commit (model_sha, or the snapshot's), or the weights file's sha256
    dtype: str = ""  # model_dtype: float32, float16, int8, ...
    pooling: str = ""  # mean, cls, ...
    format: str = ""  # weights format where the server says (the runtime: onnx); "" = not reported
    dimension: int = 0  # vector length; 0 = not known yet (TEI's /info does not report it)
    normalization: str = ""  # "l2": the clients always ask for unit vectors

    def same_embedder(self, other: EmbedderIdentity) -> bool:
        """Same weights, arithmetic and post-processing; a dimension only counts where both know it."""
        same = (self.model, self.revision, self.dtype, self.pooling, self.format, self.normalization) == (
            other.model, other.revision, other.dtype, other.pooling, other.format, other.normalization)
        return same and (not self.dimension or not other.dimension or self.dimension == other.dimension)

    def with_dimension(self, dimension: int) -> EmbedderIdentity:
        return msgspec.structs.replace(self, dimension=dimension)

    @property
    def label(self) -> str:
        """One line for people: ``repo@commit12 float16`` (``, onnx`` and ``384-d`` where known)."""
        details = ", ".join(x for x in (self.dtype, self.format, f"{self.dimension}-d" if self.dimension else "") if x)
        revision = f"@{self.revision[:12]}" if self.revision else ""
        return f"{self.model}{revision}" + (f" ({details})" if details else "")

    @property
    def fingerprint(self) -> str:
        """Stable text of every field, for config hashes and cache keys."""
        return msgspec.json.encode(msgspec.structs.asdict(self)).decode()


def model_and_revision(model_id: str) -> tuple[str, str]:
    """A snapshot path as (repo id, commit); any other model_id as it is, with no revision."""
    match = _SNAPSHOT.search(model_id.rstrip("/") + "/") if model_id else None
    if match is None:
        return model_id, ""
    return match["repo"].replace("--", "/"), match["commit"]


def from_tei_info(info: dict[str, Any], *, normalization: str = "") -> EmbedderIdentity:
    """The identity an embedding server's /info describes (TEI's fields, plus the runtime's own)."""
    model, revision = model_and_revision(str(info.get("model_id") or "unknown"))
    model_type = info.get("model_type")
    embedding = model_type.get("embedding") if isinstance(model_type, dict) else None
    own = (info.get("ragmesh") or {}).get("embedder") if isinstance(info.get("ragmesh"), dict) else None
    own = own if isinstance(own, dict) else {}
    dimension = own.get("dimension")
    return EmbedderIdentity(
        model=model,
        revision=str(info.get("model_sha") or revision),
        dtype=str(info.get("model_dtype") or ""),
        pooling=str(embedding.get("pooling") or "") if isinstance(embedding, dict) else "",
        format=str(own.get("format") or ""),
        dimension=dimension if isinstance(dimension, int) and dimension > 0 else 0,
        normalization=normalization,
    )
