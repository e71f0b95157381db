"""The embedder port over the TEI HTTP API (a TEI container, or the CPU runtime in the default)."""

from __future__ import annotations

from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.embedders.identity import EmbedderIdentity
from ragmesh_common.errors import ErrorCode, RagmeshError

from ragmesh_retrieval.domain.embedding import Embedder


class TeiEmbedder(Embedder):
    def __init__(self, client: TeiClient, *, timeout: float = 3.0) -> None:
        self.client = client
        self.timeout = timeout

    async def model_id(self) -> str:
        # TeiClient caches /info after the first success, so this is a model call only once.
        return await self.client.model_id()

    async def identity(self) -> EmbedderIdentity:
        return await self.client.identity()

    async def embed_query(self, text: str) -> list[float]:
        vectors = await self.client.embed([text], timeout=self.timeout)
        vector = vectors[0] if vectors else None
        if not isinstance(vector, list) or not vector:
            raise RagmeshError(ErrorCode.RUNTIME_ERROR, "embedding runtime returned no vector")
        return [float(x) for x in vector]

    async def close(self) -> None:
        await self.client.close()
