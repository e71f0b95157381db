"""Chunk embedding through the TEI API, batched, pipelined and spread over every configured runtime.

Each runtime (``RAGMESH_EMBED_URLS``: the CPU runtime processes or TEI replicas) gets ``concurrency``
batches in flight at once (default 2), so it always has the next batch queued while it computes one
and never waits on our HTTP round trip or JSON decoding; one runtime runs one model pass at a time,
so more in flight buys nothing but memory. With several runtimes the workers of all of them pull
from one queue of batches: a faster runtime simply takes more.
``on_batch`` hands each batch's vectors over as soon as they arrive, so the build writes points
while later batches are still being embedded (bench/index_throughput.py measures the result).
The runtimes' clients mark their requests bulk (``X-Ragmesh-Priority``): a CPU runtime that also
serves searches serves their query vectors and reranks first; TEI ignores the header.

A runtime that fails a batch for a reason another runtime may not share (unreachable, timed out, an
error status) is dropped for the rest of the call and the batch goes to one that is still up; a
batch the runtime refuses as bad input, or a failure on the last runtime left, fails the call (no
partial result). Every runtime must serve the same embedder: vectors of two models cannot share a
collection.

A runtime written ``dns+http://runtime:8091`` stands for every address that name resolves to, looked
up again at each call: Compose's ``--scale runtime=N`` and a Kubernetes headless Service publish one
address per replica under one name, so a build uses as many runtimes as are running when it starts.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from typing import Awaitable, Callable
from urllib.parse import urlsplit

import httpx

from ragmesh_common.clients import KEEPALIVE_EXPIRY_S
from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.embedders.identity import EmbedderIdentity
from ragmesh_common.errors import ErrorCode, RagmeshError

Progress = Callable[[int], Awaitable[None]]
# (index of the batch's first text, its vectors), called in completion order.
BatchSink = Callable[[int, list[list[float]]], Awaitable[None]]

log = logging.getLogger("ragmesh.indexer.embedding")

# Failures that say something about one runtime, not about the batch: another runtime may succeed.
_RUNTIME_FAULTS = frozenset({ErrorCode.UNAVAILABLE, ErrorCode.DEADLINE_EXCEEDED, ErrorCode.RUNTIME_ERROR})


DNS_PREFIX = "dns+"
Resolver = Callable[[str, int], Awaitable[list[str]]]


async def resolve_addresses(host: str, port: int) -> list[str]:
    """Every IPv4/IPv6 address ``host`` has, in the order the resolver gives, without repeats."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(info[4][0] for info in infos))


class EmbeddingRuntimes:
    """The runtimes a build embeds with, from URLs as RAGMESH_EMBED_URLS writes them; one client per
    runtime, kept across builds."""

    def __init__(self, urls: Sequence[str], *, timeout: float = 180.0, resolver: Resolver = resolve_addresses,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        if not urls:
            raise ValueError("at least one embedding runtime is needed")
        self.urls = list(urls)
        self.timeout = timeout
        self.resolver = resolver
        self.transport = transport  # tests: a transport that plays the runtimes
        self._clients: dict[str, TeiClient] = {}

    async def current(self) -> list[TeiClient]:
        clients: list[TeiClient] = []
        for url in self.urls:
            for base, host in await self._expand(url):
                if base not in self._clients:
                    self._clients[base] = self._client(base, host)
                clients.append(self._clients[base])
        return list(dict.fromkeys(clients))

    async def _expand(self, url: str) -> list[tuple[str, str]]:
        """(base URL, Host header or "") for each runtime ``url`` stands for."""
        if not url.startswith(DNS_PREFIX):
            return [(url.rstrip("/"), "")]
        parts = urlsplit(url.removeprefix(DNS_PREFIX))
        if not parts.hostname:
            raise RagmeshError(ErrorCode.INVALID_ARGUMENT, f"embedding runtime {url!r} names no host")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        try:
            addresses = await self.resolver(parts.hostname, port)
        except OSError as error:
            raise RagmeshError(ErrorCode.UNAVAILABLE,
                               f"embedding runtime {url!r}: {parts.hostname} does not resolve ({error})") from None
        if not addresses:
            raise RagmeshError(ErrorCode.UNAVAILABLE, f"embedding runtime {url!r}: {parts.hostname} has no address")
        host_header = parts.netloc.rsplit("@", 1)[-1]
        return [(f"{parts.scheme}://{f'[{a}]' if ':' in a else a}:{port}{parts.path.rstrip('/')}", host_header)
                for a in addresses]

    def _client(self, base: str, host: str) -> TeiClient:
        headers = {"host": host} if host else None
        limits = httpx.Limits(max_keepalive_connections=16, keepalive_expiry=KEEPALIVE_EXPIRY_S)
        client = httpx.AsyncClient(base_url=base, timeout=self.timeout, headers=headers, limits=limits,
                                   transport=self.transport)
        return TeiClient(base, client=client, bulk=True)

    async def close(self) -> None:
        await asyncio.gather(*(client.close() for client in self._clients.values()))


class ChunkEmbedder:
    def __init__(self, runtimes: TeiClient | Sequence[TeiClient] | EmbeddingRuntimes, *, batch: int = 32,
                 concurrency: int = 2, timeout_s: float = 120.0) -> None:
        if isinstance(runtimes, TeiClient):
            runtimes = (runtimes,)
        if not isinstance(runtimes, EmbeddingRuntimes) and not runtimes:
            raise ValueError("ChunkEmbedder needs at least one embedding runtime")
        self.runtimes = runtimes
        self.batch = max(1, batch)
        self.concurrency = max(1, concurrency)
        self.timeout_s = timeout_s

    async def clients(self) -> list[TeiClient]:
        if isinstance(self.runtimes, EmbeddingRuntimes):
            return await self.runtimes.current()
        return list(self.runtimes)

    async def model_id(self) -> str:
        return await (await self.clients())[0].model_id()

    async def identity(self) -> EmbedderIdentity:
        """The embedder every runtime serves; a runtime that serves another one is refused."""
        clients = await self.clients()
        identities = await asyncio.gather(*(client.identity() for client in clients))
        first = identities[0]
        for client, identity in zip(clients[1:], identities[1:]):
            if not identity.same_embedder(first):
                raise RagmeshError(
                    ErrorCode.RUNTIME_ERROR,
                    f"the embedding runtimes disagree: {clients[0].base_url} serves {first.label}, "
                    f"{client.base_url} serves {identity.label}; every runtime of RAGMESH_EMBED_URLS "
                    "must serve one embedder",
                )
        return first

    async def embed(self, texts: list[str], progress: Progress | None = None, *,
                    on_batch: BatchSink | None = None) -> list[list[float]]:
        """Vectors of ``texts`` in order. A failed batch fails the whole call (no partial result)."""
        clients = await self.clients()
        out: list[list[float]] = [[] for _ in texts]
        pending: asyncio.Queue[int] = asyncio.Queue()
        for start in range(0, len(texts), self.batch):
            pending.put_nowait(start)
        batches = pending.qsize()
        up = set(range(len(clients)))
        finished = 0
        done = 0
        all_done = asyncio.Event()
        if batches == 0:
            all_done.set()

        async def worker(runtime: int) -> None:
            nonlocal done, finished
            client = clients[runtime]
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
                   for runtime in range(len(clients)) for _ in range(per_runtime)]
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
