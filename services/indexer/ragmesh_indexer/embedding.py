"""Chunk embedding through the TEI API, batched, pipelined and spread over every configured runtime.

Each runtime (``RAGMESH_EMBED_URLS``: the CPU runtime processes or TEI replicas) gets ``concurrency``
batches in flight at once (default 2), so it always has the next batch queued while it computes one
and never waits on our HTTP round trip or JSON decoding; one runtime runs one model pass at a time,
so more in flight buys nothing but memory. With several runtimes the workers of all of them pull
from one queue of batches: a faster runtime simply takes more.
``on_batch`` hands each batch's vectors over as soon as they arrive, so the build writes points
while later batches are still being embedded (bench/index_throughput.py measures the result).

A runtime that fails a batch for a reason another runtime may not share (unreachable, timed out, an
error status) is dropped for the rest of the call and the batch goes to one that is still up; a
batch the runtime refuses as bad input, or a failure on the last runtime left, fails the call (no
partial result). Every runtime must serve the same embedder: vectors of two models cannot share a
collection.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Awaitable, Callable

from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.embedders.identity import EmbedderIdentity
from ragmesh_common.errors import ErrorCode, RagmeshError

Progress = Callable[[int], Awaitable[None]]
# (index of the batch's first text, its vectors), called in completion order.
BatchSink = Callable[[int, list[list[float]]], Awaitable[None]]

log = logging.getLogger("ragmesh.indexer.embedding")

# Failures that say something about one runtime, not about the batch: another runtime may succeed.
_RUNTIME_FAULTS = frozenset({ErrorCode.UNAVAILABLE, ErrorCode.DEADLINE_EXCEEDED, ErrorCode.RUNTIME_ERROR})


class ChunkEmbedder:
    def __init__(self, clients: TeiClient | Sequence[TeiClient], *, batch: int = 32, concurrency: int = 2,
                 timeout_s: float = 120.0) -> None:
        self.clients: tuple[TeiClient, ...] = (clients,) if isinstance(clients, TeiClient) else tuple(clients)
        if not self.clients:
            raise ValueError("ChunkEmbedder needs at least one embedding runtime")
        self.batch = max(1, batch)
        self.concurrency = max(1, concurrency)
        self.timeout_s = timeout_s

    @property
    def client(self) -> TeiClient:
        """The first runtime: the one whose identity names the embedder."""
        return self.clients[0]

    async def model_id(self) -> str:
        return await self.client.model_id()

    async def identity(self) -> EmbedderIdentity:
        """The embedder every runtime serves; a runtime that serves another one is refused."""
        identities = await asyncio.gather(*(client.identity() for client in self.clients))
        first = identities[0]
        for client, identity in zip(self.clients[1:], identities[1:]):
            if not identity.same_embedder(first):
                raise RagmeshError(
                    ErrorCode.RUNTIME_ERROR,
                    f"the embedding runtimes disagree: {self.client.base_url} serves {first.label}, "
                    f"{client.base_url} serves {identity.label}; every runtime of RAGMESH_EMBED_URLS "
                    "must serve one embedder",
                )
        return first

    async def embed(self, texts: list[str], progress: Progress | None = None, *,
                    on_batch: BatchSink | None = None) -> list[list[float]]:
        """Vectors of ``texts`` in order. A failed batch fails the whole call (no partial result)."""
        out: list[list[float]] = [[] for _ in texts]
        pending: asyncio.Queue[int] = asyncio.Queue()
        for start in range(0, len(texts), self.batch):
            pending.put_nowait(start)
        batches = pending.qsize()
        up = set(range(len(self.clients)))
        finished = 0
        done = 0
        all_done = asyncio.Event()
        if batches == 0:
            all_done.set()

        async def worker(runtime: int) -> None:
            nonlocal done, finished
            client = self.clients[runtime]
            # Workers pull the next batch when free: bounded memory and requests; a runtime that
            # failed stops pulling, and the batch it held goes back for the others.
            while runtime in up and not all_done.is_set():
                try:
                    start = pending.get_nowait()
                except asyncio.QueueEmpty:
                    return
                try:
                    vectors = await client.embed(texts[start:start + self.batch], timeout=self.timeout_s)
                except RagmeshError as error:
                    if error.code not in _RUNTIME_FAULTS or up == {runtime}:
                        raise
                    up.discard(runtime)
                    log.warning("embedding runtime %s dropped for this build: %s", client.base_url, error.message)
                    pending.put_nowait(start)
                    return
                out[start:start + len(vectors)] = vectors
                done += len(vectors)
                finished += 1
                if finished == batches:
                    all_done.set()
                # Progress first: whoever looks at Status while the batch is handed over sees it counted.
                if progress is not None:
                    await progress(done)
                if on_batch is not None:
                    await on_batch(start, vectors)

        per_runtime = min(self.concurrency, max(1, batches))
        workers = [asyncio.create_task(worker(runtime))
                   for runtime in range(len(self.clients)) for _ in range(per_runtime)]
        try:
            await asyncio.gather(*workers)
            # A batch handed back by a dropped runtime after the others had stopped pulling.
            while not all_done.is_set() and up:
                await asyncio.gather(*(worker(runtime) for runtime in sorted(up)))
        except BaseException:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        if not all_done.is_set():
            raise RagmeshError(ErrorCode.UNAVAILABLE, "no embedding runtime is left to embed the remaining chunks")
        return out
