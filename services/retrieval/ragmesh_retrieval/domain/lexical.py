"""Query-side BM25 encoding with each collection's own tokenizer settings."""

from __future__ import annotations

import asyncio
import logging

import msgspec

from ragmesh_common.index_schema import CollectionMeta
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_common.vectorstore.port import SparseVector

log = logging.getLogger("ragmesh.retrieval.lexical")


class QueryEncoders:
    """One LexicalEncoder per distinct lexical config (they cache stems, so they are kept)."""

    def __init__(self) -> None:
        self._encoders: dict[bytes, LexicalEncoder] = {}
        self._warned: set[str] = set()

    def encoder_for(self, meta: CollectionMeta) -> LexicalEncoder:
        key = msgspec.json.encode(meta.lexical_config)
        encoder = self._encoders.get(key)
        if encoder is None:
            encoder = self._encoders[key] = LexicalEncoder.from_dict(meta.lexical_config)
        return encoder

    def matches(self, meta: CollectionMeta) -> bool:
        """False when this process tokenizes differently from the build (another tokenizer revision
        or library version): the query still runs, and the response reports "lexical" degraded."""
        same = self.encoder_for(meta).version == meta.lexical_version
        if not same and meta.index_version not in self._warned:
            self._warned.add(meta.index_version)
            log.warning("lexical tokenizer differs from the index build",
                        extra={"fields": {"index_version": meta.index_version, "built_with": meta.lexical_version,
                                          "running": self.encoder_for(meta).version}})
        return same

    async def encode(self, meta: CollectionMeta, text: str) -> SparseVector:
        encoder = self.encoder_for(meta)
        # Tokenizing is CPU work (and jieba's first use loads its dictionary): off the event loop.
        vector = await asyncio.to_thread(encoder.encode_query, text)
        return SparseVector(indices=list(vector.indices), values=list(vector.values))
