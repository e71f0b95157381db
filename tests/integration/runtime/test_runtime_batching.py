"""Dynamic batching with the real models: batched answers equal unbatched ones, and limits hold."""

from __future__ import annotations

import asyncio
import contextlib
import threading

import httpx
import msgspec
import numpy as np
import pytest

from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_runtime.app import create_app
from ragmesh_runtime.encoder import MiniLmEncoder
from ragmesh_runtime.models import LoadedModels, load_models
from ragmesh_runtime.service import RuntimeService
from ragmesh_runtime.settings import EmbeddingSettings, RuntimeSettings, ServerSettings

# Lengths from 3 to ~200 tokens, so a shared pass pads the short ones a lot.
TEXTS = [
    "hi",
    "What do giant pandas eat?",
    "Vitamin D deficiency is associated with a higher risk of fractures in older adults. " * 6,
    "The gateway checks the host header, binds a request id and forwards the search to retrieval.",
    "表格和代码块保持完整。",
    "Aspirin reduces the risk of a first heart attack. " * 12,
]
CANDIDATES = [
    "Giant pandas eat bamboo shoots and leaves almost exclusively.",
    "Stocks rose today on strong earnings.",
    "Pandas is a Python library for data frames. " * 20,
    "Red pandas also eat bamboo, and sometimes eggs and insects.",
]
QUERIES = ["What do giant pandas eat?", "python data frames", "stock market today", "熊猫吃什么？"]


@pytest.fixture(scope="module")
def uncached_models() -> LoadedModels:
    """The cache off, so every vector below comes from a model pass, not from an earlier one."""
    return load_models(RuntimeSettings(embedding=EmbeddingSettings(cache_entries=0)))


def service_of(models: LoadedModels, **embedding) -> tuple[RuntimeService, list[tuple[int, int]]]:
    passes: list[tuple[int, int]] = []
    settings = RuntimeSettings(embedding=msgspec.structs.replace(EmbeddingSettings(cache_entries=0), **embedding))
    service = RuntimeService(models, settings,
                             observe_batch=lambda requests, tokens, _waits, _priority: passes.append((requests, tokens)))
    return service, passes


def test_embeddings_of_a_shared_pass_equal_each_text_embedded_alone(uncached_models):
    service, passes = service_of(uncached_models)

    async def main():
        alone = [(await service.embed([text], True, True)).vectors[0] for text in TEXTS]
        together = await asyncio.gather(*(service.embed([text], True, True) for text in TEXTS))
        return np.stack(alone), np.stack([e.vectors[0] for e in together])

    try:
        alone, together = asyncio.run(main())
    finally:
        service.close()
    assert passes[-1][0] == len(TEXTS)  # the concurrent requests really shared one pass
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_rerank_scores_of_a_shared_pass_equal_each_request_scored_alone(uncached_models):
    service, passes = service_of(uncached_models)

    async def main():
        alone = [await service.rerank(query, CANDIDATES, True) for query in QUERIES]
        together = await asyncio.gather(*(service.rerank(query, CANDIDATES, True) for query in QUERIES),
                                        service.embed(TEXTS[:3], True, True))
        return alone, together[:-1]

    try:
        alone, together = asyncio.run(main())
    finally:
        service.close()
    assert passes[-1][0] == len(QUERIES) + 1  # four reranks and an embed in one pass
    for one, shared in zip(alone, together):
        np.testing.assert_allclose(shared, one, atol=1e-5)


def test_a_rerank_works_out_its_windows_once_and_scores_as_the_scorer_alone(uncached_models, monkeypatch):
    # The plan (the sequences the shared pass embeds) and the scoring used to tokenize and window
    # the same candidates twice per request.
    from ragmesh_runtime.relevance import MiniLmWindowScorer

    service, _ = service_of(uncached_models)
    calls = []
    windows = MiniLmWindowScorer._windows
    monkeypatch.setattr(MiniLmWindowScorer, "_windows",
                        lambda self, *args: calls.append(args[0]) or windows(self, *args))
    try:
        served = asyncio.run(service.rerank(QUERIES[0], CANDIDATES, True))
        assert calls == [QUERIES[0]]
        alone = service.scorer.score(QUERIES[0], CANDIDATES, True)  # no batcher: plan and score in one go
    finally:
        service.close()
    np.testing.assert_allclose(served, alone, atol=1e-6)


def test_an_input_over_the_token_limit_fails_alone_in_its_batch(uncached_models):
    service, passes = service_of(uncached_models)
    too_long = "word " * (MiniLmEncoder.max_input_tokens + 10)

    async def main():
        return await asyncio.gather(service.embed(["short"], True, True), service.embed([too_long], True, False),
                                    service.rerank(too_long, ["pandas"], False), service.embed(["other"], True, True),
                                    return_exceptions=True)

    try:
        short, refused, refused_rerank, other = asyncio.run(main())
    finally:
        service.close()
    assert short.vectors.shape == other.vectors.shape == (1, 384)
    for error in (refused, refused_rerank):
        assert isinstance(error, RagmeshError) and error.code is ErrorCode.QUERY_TOO_LONG
    assert "must have at most 256 tokens" in refused.message
    assert passes == [(2, 6)]  # [CLS] short [SEP] + [CLS] other [SEP]


class FailingSession:
    """The real ONNX session, except that a batch holding the poison token id raises, as a crashed
    or out-of-memory ONNX Runtime would."""

    def __init__(self, session, poison: int) -> None:
        self._session = session
        self._poison = poison

    def get_inputs(self):
        return self._session.get_inputs()

    def run(self, outputs, feeds):
        if (feeds["input_ids"] == self._poison).any():
            raise RuntimeError("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : bad allocation")
        return self._session.run(outputs, feeds)


async def test_a_model_failure_mid_batch_fails_that_batch_with_a_clear_error_and_serves_the_next(
    uncached_models,
):
    real = uncached_models.encoder
    poison = real._tokenizer.token_to_id("poison")
    encoder = MiniLmEncoder(FailingSession(real._session, poison), real._tokenizer)
    models = LoadedModels(encoder, None, uncached_models.files, 0.0, uncached_models.bm25_terms, uncached_models.e5)
    settings = RuntimeSettings(embedding=EmbeddingSettings(cache_entries=0))
    app = create_app(settings, models)
    service: RuntimeService = app.state.runtime_service
    async with in_loop_client(app) as client:
        async with model_busy(service) as release:
            # The first request is taken alone (its pass waits for the model); the next three
            # queue meanwhile and share the following pass.
            first = asyncio.ensure_future(client.post("/embed", json={"inputs": "before"}))
            await in_flight(service, 1)
            batch = [asyncio.ensure_future(client.post(path, json=body)) for path, body in (
                ("/embed", {"inputs": "fine"}), ("/embed", {"inputs": "poison"}),
                ("/rerank", {"query": "fine", "texts": ["also fine"]}))]
            await in_flight(service, 4)
            release.set()
            first, *batch = await asyncio.gather(first, *batch)
        assert first.status_code == 200
        for response in batch:
            assert response.status_code == 424
            assert response.json()["error_type"] == "Backend"
            assert "model pass over a batch of 3 requests" in response.json()["error"]
        after = await client.post("/embed", json={"inputs": "fine"})
        assert after.status_code == 200 and len(after.json()[0]) == 384
        metrics = (await client.get("/metrics")).text
    assert "ragmesh_runtime_batch_requests_bucket" in metrics
    # The failed pass is not counted.
    assert 'ragmesh_runtime_queue_wait_seconds_count{priority="interactive"} 2.0' in metrics


def in_loop_client(app) -> httpx.AsyncClient:
    """Requests served in the test's own event loop, so several are really in flight at once
    (litestar's AsyncTestClient serves one at a time from a portal thread)."""
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://runtime")


@contextlib.asynccontextmanager
async def model_busy(service: RuntimeService):
    """The inference thread held until the caller sets the event it is given."""
    release = threading.Event()
    busy = asyncio.ensure_future(service.executor.run(release.wait, 30))
    try:
        yield release
    finally:
        release.set()
        await busy


async def in_flight(service: RuntimeService, count: int) -> None:
    while service._in_flight < count:
        await asyncio.sleep(0.01)


async def test_a_build_s_embeds_marked_bulk_wait_behind_a_search_s_rerank_and_are_counted_apart(
    runtime_models,
):
    app = create_app(RuntimeSettings(), runtime_models)
    service: RuntimeService = app.state.runtime_service
    async with in_loop_client(app) as client:
        build = TeiClient("http://runtime", client=client, bulk=True)  # as the indexer's client is
        async with model_busy(service) as release:
            # The first bulk embed is taken alone and waits for the model; the second queues, then the rerank.
            embeds = [asyncio.ensure_future(build.embed([f"chunk {i}", f"chunk {i} more"])) for i in range(2)]
            await in_flight(service, 2)
            rerank = asyncio.ensure_future(client.post("/rerank", json={"query": "q", "texts": ["a text"]}))
            await in_flight(service, 3)
            release.set()
            embedded, reranked = await asyncio.gather(asyncio.gather(*embeds), rerank)
        metrics = (await client.get("/metrics")).text
    assert [len(vectors) for vectors in embedded] == [2, 2] and reranked.status_code == 200
    # Three passes: the first bulk embed, the rerank alone (not sharing the second embed's pass), that embed.
    assert 'ragmesh_runtime_batch_requests_count{priority="bulk"} 2.0' in metrics
    assert 'ragmesh_runtime_batch_requests_count{priority="interactive"} 1.0' in metrics
    assert 'ragmesh_runtime_queue_wait_seconds_count{priority="bulk"} 2.0' in metrics


async def test_requests_over_max_concurrent_requests_get_429_while_the_batch_waits(runtime_models):
    settings = RuntimeSettings(server=ServerSettings(max_concurrent_requests=2))
    app = create_app(settings, runtime_models)
    service: RuntimeService = app.state.runtime_service
    async with in_loop_client(app) as client:
        async with model_busy(service) as release:
            queued = [asyncio.ensure_future(client.post("/embed", json={"inputs": f"text {i}"})) for i in range(2)]
            await in_flight(service, 2)
            over = await asyncio.gather(client.post("/embed", json={"inputs": "one more"}),
                                        client.post("/rerank", json={"query": "q", "texts": ["t"]}))
            release.set()
            served = await asyncio.gather(*queued)
    for response in over:
        assert response.status_code == 429
        assert response.json() == {"error": "Model is overloaded", "error_type": "Overloaded"}
    assert [r.status_code for r in served] == [200, 200]


def test_an_extractive_answer_is_an_interactive_job_of_the_batcher(uncached_models):
    """So it is served between the slices of a build's pass, as a search's requests are (it used to
    run on the inference thread outside the batcher, behind a whole bulk round)."""
    from ragmesh_runtime.generator.prompt_protocol import ChatTurn

    passes: list[tuple[int, object]] = []
    service = RuntimeService(uncached_models, RuntimeSettings(embedding=EmbeddingSettings(cache_entries=0)),
                             observe_batch=lambda requests, _tokens, _waits, priority: passes.append((requests, priority)))
    evidence = ('<evidence>\n<source id="S1" title="Pandas" heading="Diet">\nGiant pandas eat bamboo.\n</source>\n'
                "</evidence>\n<question>What do giant pandas eat?</question>")
    try:
        answer = asyncio.run(service.answer([ChatTurn("user", evidence)]))
    finally:
        service.close()
    assert answer.best_score is not None
    assert [(requests, priority.value) for requests, priority in passes] == [(1, "interactive")]
