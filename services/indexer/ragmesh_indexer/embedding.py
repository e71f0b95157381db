"""Chunk embedding through the TEI API, batched and pipelined.

Two batches are in flight at once so the runtime never waits on our HTTP round trip; the indexer's
end-to-end rate stays close to the runtime's raw rate (bench/index_throughput.py measures the ratio).
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from ragmesh_common.clients.tei import TeiClient

Progress = Callable[[int], Awaitable[None]]


class ChunkEmbedder:
    def __init__(self, client: TeiClient, *, batch: int = 32, concurrency: int = 2) -> None:
        self.client = client
        self.batch = max(1, batch)
        self.concurrency = max(1, concurrency)

    async def model_id(self) -> str:
        return await self.client.model_id()

    async def embed(self, texts: list[str], progress: Progress | None = None) -> list[list[float]]:
        out: list[list[float] | None] = [None] * len(texts)
        gate = asyncio.Semaphore(self.concurrency)
        done = 0

        async def run(start: int) -> None:
            nonlocal done
            async with gate:
                vectors = await self.client.embed(texts[start:start + self.batch], timeout=120)
            out[start:start + len(vectors)] = vectors
            done += len(vectors)
            if progress is not None:
                await progress(done)

        await asyncio.gather(*(run(i) for i in range(0, len(texts), self.batch)))
        return [v for v in out if v is not None]
