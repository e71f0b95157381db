"""The embedder port and an LRU cache in front of it, so a repeated query costs no model call."""

from __future__ import annotations

import abc
from collections import OrderedDict

from ragmesh_common.embedders.identity import EmbedderIdentity


class Embedder(abc.ABC):
    @abc.abstractmethod
    async def model_id(self) -> str:
        """The model the runtime serves; raises RagmeshError (UNAVAILABLE, ...) when it is down."""

    async def identity(self) -> EmbedderIdentity:
        """What /info says of the embedder (embedders.identity); the model id alone by default."""
        return EmbedderIdentity(model=await self.model_id())

    @abc.abstractmethod
    async def embed_query(self, text: str) -> list[float]: ...

    async def close(self) -> None:
        return None


class CachedEmbedder(Embedder):
    """Keyed by (embedder identity, text): a runtime that switches models never serves stale vectors."""

    def __init__(self, inner: Embedder, *, max_entries: int = 1024) -> None:
        self.inner = inner
        self.max_entries = max_entries
        self._vectors: OrderedDict[tuple[str, str], list[float]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    async def model_id(self) -> str:
        return await self.inner.model_id()

    async def identity(self) -> EmbedderIdentity:
        return await self.inner.identity()

    async def embed_query(self, text: str) -> list[float]:
        key = ((await self.inner.identity()).fingerprint, text)
        vector = self._vectors.get(key)
        if vector is not None:
            self._vectors.move_to_end(key)
            self.hits += 1
            return vector
        self.misses += 1
        vector = await self.inner.embed_query(text)
        if self.max_entries > 0:
            self._vectors[key] = vector
            if len(self._vectors) > self.max_entries:
                self._vectors.popitem(last=False)
        return vector

    async def close(self) -> None:
        await self.inner.close()
