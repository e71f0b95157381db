"""Rerank over real gRPC, against a TEI double and the real CPU runtime."""

from __future__ import annotations

import pytest
from ragmesh.v1 import rerank_pb2

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_common.rpc.client import unary

TEXTS = [
    "Bananas are yellow and rich in potassium.",
    "The server listens on port 8080 by default.",
    "Change the listening port of the server with the --port flag.",
]


async def rerank(stub, query: str, texts: list[str], top_n: int = 0, timeout: float = 10) -> rerank_pb2.RerankResponse:
    return await unary(stub.Rerank, rerank_pb2.RerankRequest(query=query, texts=texts, top_n=top_n),
                       timeout=timeout, peer="rerank")


async def test_rerank_through_tei(fake_tei, start_rerank) -> None:
    runtime, url = fake_tei
    stub = await start_rerank(url)
    reply = await rerank(stub, "server port default", TEXTS, top_n=2)
    assert [r.index for r in reply.results] == [1, 2]
    assert reply.results[0].score >= reply.results[1].score
    assert (reply.model_id, reply.score_kind) == ("fake/cross-encoder", "cross_encoder")
    assert runtime.bodies[0]["texts"] == TEXTS


async def test_retrieval_priors_are_fused_over_grpc(fake_tei, start_rerank) -> None:
    runtime, url = fake_tei
    stub = await start_rerank(url, prior_dense=0.0, prior_sparse=2.0)
    # The cross-encoder double prefers text 1, then 2; BM25 over the collection prefers text 2 by far.
    priors = [rerank_pb2.Prior(dense=0.2, sparse=0.0), rerank_pb2.Prior(dense=0.3, sparse=1.0),
              rerank_pb2.Prior(dense=0.4, sparse=40.0)]
    reply = await unary(stub.Rerank, rerank_pb2.RerankRequest(query="server port default", texts=TEXTS,
                                                              priors=priors), timeout=10, peer="rerank")
    assert [r.index for r in reply.results] == [2, 1, 0]
    assert reply.score_kind.startswith("fused: z[cross_encoder] + 0 x z[retrieval's dense cosine] + 2 x")
    assert runtime.bodies[0]["raw_scores"] is True  # fusion standardises raw scores, not squashed ones
    without = await rerank(stub, "server port default", TEXTS)
    assert [r.index for r in without.results][:2] == [1, 2] and without.score_kind == "cross_encoder"


async def test_priors_of_another_length_are_invalid(fake_tei, start_rerank) -> None:
    _, url = fake_tei
    stub = await start_rerank(url)
    with pytest.raises(RagmeshError) as caught:
        await unary(stub.Rerank, rerank_pb2.RerankRequest(query="q", texts=TEXTS, priors=[rerank_pb2.Prior()]),
                    timeout=10, peer="rerank")
    assert caught.value.code is ErrorCode.INVALID_ARGUMENT


async def test_rerank_through_the_cpu_runtime(cpu_runtime_url: str, start_rerank) -> None:
    stub = await start_rerank(cpu_runtime_url)
    reply = await rerank(stub, "which port does the server listen on", TEXTS)
    assert sorted(r.index for r in reply.results) == [0, 1, 2]
    assert reply.results[-1].index == 0  # bananas last
    assert [r.score for r in reply.results] == sorted((r.score for r in reply.results), reverse=True)
    assert reply.score_kind == "blend"  # what the runtime says it computes (its default method), not "cross_encoder"
    assert reply.model_id


async def test_runtime_down_is_unavailable(start_rerank, free_port) -> None:
    stub = await start_rerank(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(RagmeshError) as caught:
        await rerank(stub, "q", TEXTS)
    assert caught.value.code is ErrorCode.UNAVAILABLE


async def test_callers_deadline_is_honoured(fake_tei, start_rerank) -> None:
    runtime, url = fake_tei
    runtime.delay_s = 5
    stub = await start_rerank(url)
    with pytest.raises(RagmeshError) as caught:
        await rerank(stub, "q", TEXTS, timeout=0.5)
    assert caught.value.code is ErrorCode.DEADLINE_EXCEEDED


@pytest.mark.parametrize(("query", "texts", "code"), [
    ("", TEXTS, ErrorCode.QUERY_EMPTY),
    ("q", ["t"] * 201, ErrorCode.INVALID_ARGUMENT),
])
async def test_invalid_input(fake_tei, start_rerank, query: str, texts: list[str], code: ErrorCode) -> None:
    runtime, url = fake_tei
    stub = await start_rerank(url)
    with pytest.raises(RagmeshError) as caught:
        await rerank(stub, query, texts)
    assert caught.value.code is code
    assert runtime.bodies == []
