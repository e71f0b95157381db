"""Chunk embedding through the TEI API, batched and pipelined.

``concurrency`` batches are in flight at once (default 2), so the runtime always has the next batch
queued while it computes one and never waits on our HTTP round trip or JSON decoding. The runtime
runs one inference at a time anyway, so more in flight buys nothing but memory.
``on_batch`` hands each batch's vectors over as soon as they arrive, so the build writes points
while later batches are still being embedded (bench/index_throughput.py measures the result).
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable

from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.embedders.identity import EmbedderIdentity

Progress = Callable[[int], Awaitable[None]]
# (index of the batch's first text, its vectors), called in completion order.
BatchSink = Callable[[int, list[list[float]]], Awaitable[None]]


class ChunkEmbedder:
    def __init__(self, client: TeiClient, *, batch: int = 32, concurrency: int = 2,
                 timeout_s: float = 120.0) -> None:
        self.client = client
        self.batch = max(1, batch)
        self.concurrency = max(1, concurrency)
        self.timeout_s = timeout_s

    async def model_id(self) -> str:
        return await self.client.model_id()

    async def identity(self) -> EmbedderIdentity:
        return await self.client.identity()

    async def embed(self, texts: list[str], progress: Progress | None = None, *,
                    on_batch: BatchSink | None = None) -> list[list[float]]:
        """Vectors of ``texts`` in order. A failed batch fails the whole call (no partial result)."""
        out: list[list[float]] = [[] for _ in texts]
        starts = iter(range(0, len(texts), self.batch))
        done = 0

        async def worker() -> None:
            nonlocal done
            # Workers pull the next batch when free: bounded memory and requests, in-order submission.
            for start in starts:
                vectors = await self.client.embed(texts[start:start + self.batch], timeout=self.timeout_s)
                out[start:start + len(vectors)] = vectors
                done += len(vectors)
                # Progress first: whoever looks at Status while the batch is handed over sees it counted.
                if progress is not None:
                    await progress(done)
                if on_batch is not None:
                    await on_batch(start, vectors)

        workers = [asyncio.create_task(worker()) for _ in range(min(self.concurrency, len(texts)))]
        try:
            await asyncio.gather(*workers)
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        return out
