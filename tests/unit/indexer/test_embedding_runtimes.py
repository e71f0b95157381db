"""A build's embedding batches spread over every runtime of RAGMESH_EMBED_URLS: each runtime gets
work, the vectors come back in order, a runtime that fails is dropped while the others finish the
build, and runtimes that serve different embedders are refused. The real TeiClient talks to
runtimes played by httpx's MockTransport."""

from __future__ import annotations

import asyncio
import json
import socket

import httpx
import pytest

from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_indexer.embedding import ChunkEmbedder, EmbeddingRuntimes
from ragmesh_indexer.settings import IndexerSettings


def vector_of(text: str) -> list[float]:
    number = int(text.removeprefix("chunk "))
    return [float(number), 1.0]


class FakeRuntime:
    """An embedding runtime: answers /embed with one vector per text (after an await, so that batches
    of several runtimes interleave), counts the batches it served, can fail from a given batch on."""

    def __init__(self, url: str, *, model: str = "minilm", fail_from: int | None = None, status: int = 503):
        self.url = url
        self.model = model
        self.fail_from = fail_from
        self.status = status
        self.served = 0
        self.seen = 0
        self.priorities: list[str | None] = []  # each /embed request's X-Ragmesh-Priority

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/info":
            return httpx.Response(200, json={"model_id": self.model, "model_dtype": "int8",
                                             "model_type": {"embedding": {"pooling": "mean"}}})
        self.seen += 1
        self.priorities.append(request.headers.get("X-Ragmesh-Priority"))
        if self.fail_from is not None and self.seen > self.fail_from:
            return httpx.Response(self.status, json={"error": "down", "error_type": "Backend"})
        self.served += 1
        texts = json.loads(request.content)["inputs"]
        return httpx.Response(200, json=[vector_of(text) for text in texts])

    def client(self) -> TeiClient:
        async def handle(request: httpx.Request) -> httpx.Response:
            await asyncio.sleep(0.001)
            return self.handler(request)

        transport = httpx.MockTransport(handle)
        return TeiClient(self.url, client=httpx.AsyncClient(base_url=self.url, transport=transport))


TEXTS = [f"chunk {n}" for n in range(100)]


async def test_batches_are_spread_over_every_runtime_and_come_back_in_order() -> None:
    runtimes = [FakeRuntime("http://runtime-a"), FakeRuntime("http://runtime-b")]
    embedder = ChunkEmbedder([runtime.client() for runtime in runtimes], batch=8, concurrency=2)
    seen: list[int] = []

    async def progress(done: int) -> None:
        seen.append(done)

    vectors = await embedder.embed(TEXTS, progress)
    assert vectors == [vector_of(text) for text in TEXTS]
    assert all(runtime.served > 0 for runtime in runtimes)
    assert sum(runtime.served for runtime in runtimes) == 13  # ceil(100 / 8): each batch once
    assert seen[-1] == 100 and seen == sorted(seen)


async def test_a_runtime_that_fails_is_dropped_and_the_others_finish_the_build() -> None:
    failing = FakeRuntime("http://runtime-a", fail_from=2)
    healthy = FakeRuntime("http://runtime-b")
    embedder = ChunkEmbedder([failing.client(), healthy.client()], batch=8, concurrency=2)
    vectors = await embedder.embed(TEXTS)
    assert vectors == [vector_of(text) for text in TEXTS]
    assert failing.served == 2
    assert failing.served + healthy.served == 13


async def test_a_batch_refused_as_bad_input_fails_the_call_on_any_runtime() -> None:
    refusing = FakeRuntime("http://runtime-a", fail_from=0, status=413)
    embedder = ChunkEmbedder([refusing.client(), FakeRuntime("http://runtime-b").client()], batch=8)
    with pytest.raises(RagmeshError) as caught:
        await embedder.embed(TEXTS)
    assert caught.value.code == ErrorCode.INVALID_ARGUMENT


async def test_the_last_runtime_left_failing_fails_the_call() -> None:
    runtimes = [FakeRuntime("http://runtime-a", fail_from=1), FakeRuntime("http://runtime-b", fail_from=1)]
    embedder = ChunkEmbedder([runtime.client() for runtime in runtimes], batch=8, concurrency=1)
    with pytest.raises(RagmeshError) as caught:
        await embedder.embed(TEXTS)
    assert caught.value.code == ErrorCode.RUNTIME_ERROR


async def test_runtimes_that_serve_different_embedders_are_refused() -> None:
    embedder = ChunkEmbedder([FakeRuntime("http://runtime-a").client(),
                              FakeRuntime("http://runtime-b", model="e5-small").client()])
    with pytest.raises(RagmeshError) as caught:
        await embedder.identity()
    assert "http://runtime-a" in caught.value.message and "http://runtime-b" in caught.value.message
    assert "e5-small" in caught.value.message


async def test_one_runtime_is_a_list_of_one() -> None:
    runtime = FakeRuntime("http://runtime-a")
    embedder = ChunkEmbedder(runtime.client(), batch=32)
    assert await embedder.embed(TEXTS[:40]) == [vector_of(text) for text in TEXTS[:40]]
    assert (await embedder.identity()).model == "minilm"
    assert await embedder.embed([]) == []


async def test_a_build_marks_its_embed_requests_bulk_and_other_clients_do_not() -> None:
    runtime = FakeRuntime("http://runtime-a")
    runtimes = EmbeddingRuntimes([runtime.url], transport=httpx.MockTransport(runtime.handler))
    vectors = await ChunkEmbedder(runtimes, batch=8).embed(TEXTS[:20])
    assert vectors == [vector_of(text) for text in TEXTS[:20]]
    await runtimes.close()
    assert runtime.priorities == ["bulk"] * 3  # a runtime serves searches' requests first
    await runtime.client().embed(TEXTS[:1])  # a plain TeiClient, as retrieval's
    assert runtime.priorities[3:] == [None]


def test_the_runtimes_come_from_embed_urls_else_embed_url(monkeypatch) -> None:
    monkeypatch.setenv("RAGMESH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
    monkeypatch.setenv("RAGMESH_EMBED_URL", "http://127.0.0.1:8091")
    monkeypatch.delenv("RAGMESH_EMBED_URLS", raising=False)
    assert IndexerSettings.from_env().embedding_runtimes == ["http://127.0.0.1:8091"]
    monkeypatch.setenv("RAGMESH_EMBED_URLS", "http://127.0.0.1:8091, http://127.0.0.1:8092")
    assert IndexerSettings.from_env().embedding_runtimes == ["http://127.0.0.1:8091", "http://127.0.0.1:8092"]


class Replicas:
    """Runtime replicas behind one name, as Compose's --scale or a headless Service publish them."""

    def __init__(self, addresses: list[str]) -> None:
        self.addresses = addresses
        self.by_address = {address: FakeRuntime(f"http://{address}:8091") for address in addresses}
        self.hosts: set[str] = set()
        self.lookups: list[tuple[str, int]] = []

    async def resolve(self, host: str, port: int) -> list[str]:
        self.lookups.append((host, port))
        return list(self.addresses)

    def transport(self) -> httpx.MockTransport:
        async def handle(request: httpx.Request) -> httpx.Response:
            self.hosts.add(request.headers["host"])
            await asyncio.sleep(0.001)
            return self.by_address[request.url.host].handler(request)

        return httpx.MockTransport(handle)


async def test_a_dns_runtime_is_every_address_its_name_has_at_each_build() -> None:
    replicas = Replicas(["10.0.0.5", "10.0.0.6"])
    runtimes = EmbeddingRuntimes(["dns+http://runtime:8091"], resolver=replicas.resolve,
                                 transport=replicas.transport())
    embedder = ChunkEmbedder(runtimes, batch=8)
    assert await embedder.embed(TEXTS) == [vector_of(text) for text in TEXTS]
    assert all(runtime.served > 0 for runtime in replicas.by_address.values())
    assert replicas.hosts == {"runtime:8091"} and replicas.lookups == [("runtime", 8091)]
    # Scaled to three: the next build uses the new replica; the clients of the others are kept.
    replicas.addresses.append("10.0.0.7")
    replicas.by_address["10.0.0.7"] = FakeRuntime("http://10.0.0.7:8091")
    kept = await runtimes.current()
    assert [client.base_url for client in kept] == [f"http://10.0.0.{n}:8091" for n in (5, 6, 7)]
    await embedder.embed(TEXTS)
    assert replicas.by_address["10.0.0.7"].served > 0
    await runtimes.close()


async def test_plain_urls_are_used_as_they_are() -> None:
    async def no_lookup(host: str, port: int) -> list[str]:
        raise AssertionError("a plain URL is never looked up")

    runtimes = EmbeddingRuntimes(["http://127.0.0.1:8091/", "http://127.0.0.1:8092"], resolver=no_lookup)
    assert [client.base_url for client in await runtimes.current()] == ["http://127.0.0.1:8091",
                                                                         "http://127.0.0.1:8092"]
    await runtimes.close()


async def test_a_dns_name_that_does_not_resolve_is_a_clear_error() -> None:
    async def unknown(host: str, port: int) -> list[str]:
        raise socket.gaierror(-2, "Name or service not known")

    runtimes = EmbeddingRuntimes(["dns+http://runtime:8091"], resolver=unknown)
    with pytest.raises(RagmeshError) as caught:
        await ChunkEmbedder(runtimes).embed(TEXTS)
    assert caught.value.code == ErrorCode.UNAVAILABLE
    assert "runtime does not resolve" in caught.value.message
