"""RerankService and the TEI adapter: validation, deadlines, ordering, what the score means."""

from __future__ import annotations

import asyncio

import httpx
import msgspec
import numpy as np
import pytest

from ragmesh_common.clients.tei import TeiClient
from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.scoring import standardised
from ragmesh_rerank.fusion import Prior, PriorFusion
from ragmesh_rerank.ports import RankedText, Reranker, RerankerIdentity
from ragmesh_rerank.service import RerankQuery, RerankService
from ragmesh_rerank.settings import RerankSettings
from ragmesh_rerank.tei_reranker import TeiReranker, score_kind_from_info

SETTINGS = RerankSettings(listen="127.0.0.1:0", metrics_port=0, rerank_url="http://unused", runtime_timeout_s=5.0,
                          max_texts=200, max_text_chars=100, max_query_chars=4000)


class LengthReranker(Reranker):
    """Scores a text by its length; records what it was asked and with which timeout."""

    def __init__(self, *, fail: RagmeshError | None = None, hang: bool = False) -> None:
        self.fail = fail
        self.hang = hang
        self.seen: list[tuple[str, list[str], float]] = []

    async def rerank(self, query: str, texts: list[str], *, timeout: float) -> list[RankedText]:
        self.seen.append((query, texts, timeout))
        if self.fail:
            raise self.fail
        if self.hang:
            await asyncio.sleep(3600)
        return [RankedText(i, float(len(t))) for i, t in enumerate(texts)]

    async def identity(self, *, timeout: float) -> RerankerIdentity:
        return RerankerIdentity("length-model", "text_length")


async def test_results_best_first_with_model_and_score_kind() -> None:
    reranker = LengthReranker()
    outcome = await RerankService(reranker, SETTINGS).rerank(
        RerankQuery("q", ["bb", "a", "cccc", "ddd"]), time_remaining=None)
    assert [r.index for r in outcome.results] == [2, 3, 0, 1]
    assert (outcome.model_id, outcome.score_kind) == ("length-model", "text_length")


async def test_top_n_limits_the_results() -> None:
    outcome = await RerankService(LengthReranker(), SETTINGS).rerank(
        RerankQuery("q", ["bb", "a", "cccc"], top_n=2), time_remaining=None)
    assert [r.index for r in outcome.results] == [2, 0]


async def test_empty_texts_do_not_call_the_runtime() -> None:
    reranker = LengthReranker()
    outcome = await RerankService(reranker, SETTINGS).rerank(RerankQuery("q", []), time_remaining=None)
    assert outcome.results == [] and reranker.seen == []


@pytest.mark.parametrize(("query", "texts", "top_n", "code"), [
    ("", ["a"], 0, ErrorCode.QUERY_EMPTY),
    ("  \n", ["a"], 0, ErrorCode.QUERY_EMPTY),
    ("q" * 4001, ["a"], 0, ErrorCode.QUERY_TOO_LONG),
    ("q", ["a"] * 201, 0, ErrorCode.INVALID_ARGUMENT),
    ("q", ["a"], -1, ErrorCode.INVALID_ARGUMENT),
])
async def test_invalid_input(query: str, texts: list[str], top_n: int, code: ErrorCode) -> None:
    reranker = LengthReranker()
    with pytest.raises(RagmeshError) as caught:
        await RerankService(reranker, SETTINGS).rerank(RerankQuery(query, texts, top_n), time_remaining=None)
    assert caught.value.code is code
    assert reranker.seen == []


async def test_long_texts_are_cut_not_rejected() -> None:
    reranker = LengthReranker()
    await RerankService(reranker, SETTINGS).rerank(RerankQuery("q", ["x" * 500, "y"]), time_remaining=None)
    assert [len(t) for t in reranker.seen[0][1]] == [100, 1]


async def test_callers_remaining_time_bounds_the_runtime_call() -> None:
    reranker = LengthReranker()
    service = RerankService(reranker, SETTINGS)
    await service.rerank(RerankQuery("q", ["a"]), time_remaining=1.0)
    await service.rerank(RerankQuery("q", ["a"]), time_remaining=None)
    assert reranker.seen[0][2] <= 1.0
    assert reranker.seen[1][2] <= SETTINGS.runtime_timeout_s and reranker.seen[1][2] > 1.0
    with pytest.raises(RagmeshError) as caught:
        await service.rerank(RerankQuery("q", ["a"]), time_remaining=0.0)
    assert caught.value.code is ErrorCode.DEADLINE_EXCEEDED


@pytest.mark.parametrize("code", [ErrorCode.UNAVAILABLE, ErrorCode.DEADLINE_EXCEEDED, ErrorCode.RUNTIME_ERROR])
async def test_runtime_errors_keep_their_code(code: ErrorCode) -> None:
    with pytest.raises(RagmeshError) as caught:
        await RerankService(LengthReranker(fail=RagmeshError(code, "x")), SETTINGS).rerank(
            RerankQuery("q", ["a"]), time_remaining=None)
    assert caught.value.code is code


async def test_stage_duration_metric_is_recorded() -> None:
    from prometheus_client import REGISTRY as registry

    def observed() -> float:
        return registry.get_sample_value("ragmesh_retrieval_stage_duration_seconds_count", {"stage": "rerank"}) or 0

    before = observed()
    await RerankService(LengthReranker(), SETTINGS).rerank(RerankQuery("q", ["a"]), time_remaining=None)
    assert observed() == before + 1


# -- the TEI adapter, against an httpx MockTransport (TEI's wire format) ----------------------------

def tei(handler) -> TeiReranker:  # noqa: ANN001 - httpx handler
    client = httpx.AsyncClient(base_url="http://tei", transport=httpx.MockTransport(handler))
    return TeiReranker(TeiClient("http://tei", client=client))


async def test_tei_adapter_reads_scores_and_identity() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/info":
            return httpx.Response(200, json={"model_id": "BAAI/bge-reranker-base", "model_type": {
                "reranker": {"id2label": {"0": "LABEL_0"}}}})
        return httpx.Response(200, json=[{"index": 1, "score": 0.9}, {"index": 0, "score": 0.2}])

    reranker = tei(handler)
    assert await reranker.rerank("q", ["a", "b"], timeout=1) == [RankedText(1, 0.9), RankedText(0, 0.2)]
    assert await reranker.identity(timeout=1) == RerankerIdentity("BAAI/bge-reranker-base", "cross_encoder")


async def test_tei_adapter_rejects_indexes_out_of_range() -> None:
    reranker = tei(lambda request: httpx.Response(200, json=[{"index": 5, "score": 0.9}]))
    with pytest.raises(RagmeshError) as caught:
        await reranker.rerank("q", ["a"], timeout=1)
    assert caught.value.code is ErrorCode.RUNTIME_ERROR


async def test_tei_adapter_maps_connection_failure_and_timeout() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("slow", request=request)

    for handler, code in ((refuse, ErrorCode.UNAVAILABLE), (slow, ErrorCode.DEADLINE_EXCEEDED)):
        with pytest.raises(RagmeshError) as caught:
            await tei(handler).rerank("q", ["a"], timeout=1)
        assert caught.value.code is code


async def test_tei_adapter_cuts_a_slow_runtime_at_the_timeout() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.sleep(3600)
        return httpx.Response(200, json=[])

    with pytest.raises(RagmeshError) as caught:
        await tei(handler).rerank("q", ["a"], timeout=0.05)
    assert caught.value.code is ErrorCode.DEADLINE_EXCEEDED


@pytest.mark.parametrize(("info", "kind"), [
    ({"model_type": {"reranker": {}}}, "cross_encoder"),
    ({"model_type": {"embedding": {"pooling": "mean"}}}, "unknown"),
    ({"model_type": {"embedding": {}}, "ragmesh": {"rerank_method": "minilm-window"}}, "minilm-window"),
    ({"ragmesh": {"score_kind": "bm25"}, "model_type": {"reranker": {}}}, "bm25"),
    ({"ragmesh": {"rerank": {"kind": "cosine"}}}, "cosine"),
    ({}, "unknown"),
])
def test_score_kind_comes_from_what_the_runtime_says(info: dict, kind: str) -> None:
    assert score_kind_from_info(info) == kind


async def test_rerank_call_is_a_span() -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    service = RerankService(LengthReranker(), SETTINGS, span_tracer=provider.get_tracer("test"))
    await service.rerank(RerankQuery("q", ["a", "b"]), time_remaining=None)
    (span,) = exporter.get_finished_spans()
    assert span.name == "rerank"
    assert dict(span.attributes) == {"ragmesh.rerank.texts": 2, "ragmesh.rerank.top_n": 0,
                                     "ragmesh.rerank.model": "length-model", "ragmesh.rerank.score_kind": "text_length"}


# -- batching: a candidate list longer than the runtime's cap ------------------------------------

def _capped_tei(info: dict, seen: list[list[str]]) -> TeiReranker:
    import json

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/info":
            return httpx.Response(200, json=info)
        texts = json.loads(request.content)["texts"]
        seen.append(texts)
        # Scores by length, best first, as TEI answers.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        return httpx.Response(200, json=[{"index": i, "score": float(len(texts[i]))} for i in order])

    client = httpx.AsyncClient(base_url="http://tei", transport=httpx.MockTransport(handler))
    return TeiReranker(TeiClient("http://tei", client=client), batch_size=4)


@pytest.mark.parametrize(("info", "cap"), [
    ({"max_client_batch_size": 3}, 3),
    ({"max_client_batch_size": 32, "ragmesh": {"rerank_max_texts": 5}}, 5),
    ({}, 4),  # nothing advertised: the configured batch size
])
async def test_tei_adapter_splits_texts_at_the_runtimes_cap(info: dict, cap: int) -> None:
    seen: list[list[str]] = []
    texts = ["x" * n for n in (3, 11, 7, 1, 9, 2, 12, 5, 4, 8, 10, 6)]
    ranked = await _capped_tei(info, seen).rerank("q", texts, timeout=1)
    assert max(len(batch) for batch in seen) == cap
    assert sorted(sum(seen, [])) == sorted(texts)
    # Indices point into the caller's list, not into a batch.
    assert sorted(r.index for r in ranked) == list(range(len(texts)))
    assert all(r.score == len(texts[r.index]) for r in ranked)


async def test_identity_reports_the_runtimes_cap() -> None:
    identity = await _capped_tei({"model_id": "m", "ragmesh": {"rerank_max_texts": 128}}, []).identity(timeout=1)
    assert identity.max_texts == 128


# --- fusion with retrieval's priors ------------------------------------------------------------

FUSING = msgspec.structs.replace(SETTINGS, prior_dense=0.5, prior_sparse=2.0)


async def test_priors_are_fused_with_the_runtime_score() -> None:
    # Length says 2 > 1 > 0; BM25 over the collection strongly prefers text 0.
    priors = [Prior(dense=0.5, sparse=30.0), Prior(dense=0.5, sparse=1.0), Prior(dense=0.5, sparse=0.0)]
    outcome = await RerankService(LengthReranker(), FUSING).rerank(
        RerankQuery("q", ["a", "bb", "ccc"], priors=priors), time_remaining=None)
    runtime = standardised(np.array([1.0, 2.0, 3.0]))
    expected = runtime + 2.0 * standardised(np.array([30.0, 1.0, 0.0]))  # dense is flat: z = 0
    assert [r.index for r in outcome.results] == list(np.argsort(-expected))
    assert [r.score for r in outcome.results] == pytest.approx(sorted(expected, reverse=True))
    assert outcome.results[0].index == 0
    assert outcome.score_kind.startswith("fused: z[text_length] + 0.5 x z[retrieval's dense cosine]")


async def test_without_priors_or_with_zero_weights_the_runtime_order_stands() -> None:
    priors = [Prior(sparse=30.0), Prior(sparse=1.0), Prior(sparse=0.0)]
    off = msgspec.structs.replace(SETTINGS, prior_dense=0.0, prior_sparse=0.0)
    for settings, request in ((off, RerankQuery("q", ["a", "bb", "ccc"], priors=priors)),
                              (FUSING, RerankQuery("q", ["a", "bb", "ccc"]))):
        outcome = await RerankService(LengthReranker(), settings).rerank(request, time_remaining=None)
        assert [r.index for r in outcome.results] == [2, 1, 0]
        assert [r.score for r in outcome.results] == [3.0, 2.0, 1.0]
        assert outcome.score_kind == "text_length"


async def test_a_missing_prior_has_no_say() -> None:
    # Text 1 has no dense score (say, embedding was down for it): it takes the mean, z = 0.
    fusion = PriorFusion(dense_weight=1.0, sparse_weight=0.0)
    fused = fusion.fuse([RankedText(0, 0.0), RankedText(1, 0.0), RankedText(2, 0.0)],
                        [Prior(dense=0.9), Prior(dense=None), Prior(dense=0.1)])
    assert [r.index for r in fused] == [0, 1, 2]
    assert fused[1].score == pytest.approx(0.0)


async def test_priors_must_match_the_texts() -> None:
    with pytest.raises(RagmeshError) as caught:
        await RerankService(LengthReranker(), FUSING).rerank(
            RerankQuery("q", ["a", "b"], priors=[Prior(sparse=1.0)]), time_remaining=None)
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


def test_negative_prior_weights_are_refused() -> None:
    with pytest.raises(ValueError):
        PriorFusion(dense_weight=-1.0, sparse_weight=0.0)
