"""The dynamic batcher: who shares a model pass, who goes first, and whose error is whose (a counting
encoder)."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Sequence

import numpy as np
import pytest

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_runtime.batching import DynamicBatcher, Priority
from ragmesh_runtime.service import InferenceExecutor

POISON = 666
INTERACTIVE, BULK = Priority.INTERACTIVE, Priority.BULK


class CountingEncoder:
    """Vector of a sequence = [its sum, its length]; remembers each pass; a POISON id fails the pass."""

    def __init__(self, cached: Sequence[Sequence[int]] = ()) -> None:
        self.passes: list[list[tuple[int, ...]]] = []
        self.cached = {tuple(s) for s in cached}
        self.current: dict[tuple[int, ...], np.ndarray] = {}

    def embed_sequences(self, sequences, normalize=True):
        self.passes.append([tuple(s) for s in sequences])
        if any(POISON in s for s in sequences):
            raise RuntimeError("onnxruntime died")
        return np.array([[sum(s), len(s)] for s in sequences], dtype=np.float32)

    def is_cached(self, sequence) -> bool:
        return tuple(sequence) in self.cached

    @contextlib.contextmanager
    def reusing(self, vectors):
        self.current = vectors
        yield
        self.current = {}


def batcher(encoder: CountingEncoder, observed: list | None = None, **limits) -> DynamicBatcher:
    limits.setdefault("max_batch_tokens", 10_000)
    observe = (lambda requests, tokens, waits, priority: observed.append((requests, tokens, len(waits)))) \
        if observed is not None else None
    return DynamicBatcher(encoder, InferenceExecutor(), observe=observe, **limits)


def job(encoder: CountingEncoder, *sequences: list[int]):
    """plan: the sequences; run: their vectors' first components, read from the shared pass."""
    return (lambda: list(sequences),
            lambda planned: [float(encoder.current[tuple(s)][0]) for s in planned])


def test_concurrent_requests_share_one_model_pass_and_each_gets_its_own_answer():
    encoder, observed = CountingEncoder(), []
    service = batcher(encoder, observed)

    async def main():
        return await asyncio.gather(*(service.submit(*job(encoder, [i, i], [i])) for i in range(1, 5)))

    assert asyncio.run(main()) == [[2.0, 1.0], [4.0, 2.0], [6.0, 3.0], [8.0, 4.0]]
    assert len(encoder.passes) == 1 and len(encoder.passes[0]) == 8
    assert observed == [(4, 12, 4)]


def test_a_lone_request_is_a_pass_of_its_own():
    encoder, observed = CountingEncoder(), []
    service = batcher(encoder, observed)

    async def main():
        first = await service.submit(*job(encoder, [1, 2]))
        second = await service.submit(*job(encoder, [3]))
        return first, second

    assert asyncio.run(main()) == ([3.0], [3.0])
    assert observed == [(1, 2, 1), (1, 1, 1)]


def test_a_sequence_two_requests_share_is_computed_once():
    encoder = CountingEncoder()
    service = batcher(encoder)

    async def main():
        return await asyncio.gather(service.submit(*job(encoder, [5, 5])), service.submit(*job(encoder, [5, 5], [1])))

    assert asyncio.run(main()) == [[10.0], [10.0, 1.0]]
    assert encoder.passes == [[(5, 5), (1,)]]


def test_the_token_limit_closes_a_pass_and_cached_sequences_cost_nothing():
    encoder, observed = CountingEncoder(cached=[[9] * 50]), []
    service = batcher(encoder, observed, max_batch_tokens=25)

    async def main():
        # 10 new tokens each, plus a 50-token sequence the cache holds: two fit a pass, not three.
        return await asyncio.gather(*(service.submit(*job(encoder, [i] * 10, [9] * 50)) for i in range(5)))

    results = asyncio.run(main())
    assert [r[0] for r in results] == [0.0, 10.0, 20.0, 30.0, 40.0]
    assert [(requests, tokens) for requests, tokens, _ in observed] == [(2, 20), (2, 20), (1, 10)]


def test_a_request_over_the_token_limit_is_served_alone():
    encoder, observed = CountingEncoder(), []
    service = batcher(encoder, observed, max_batch_tokens=8)

    async def main():
        return await asyncio.gather(service.submit(*job(encoder, [1])), service.submit(*job(encoder, [2] * 20)),
                                    service.submit(*job(encoder, [3])))

    assert asyncio.run(main()) == [[1.0], [40.0], [3.0]]
    assert [requests for requests, _, _ in observed] == [1, 1, 1]


def test_max_batch_requests_bounds_a_pass():
    encoder, observed = CountingEncoder(), []
    service = batcher(encoder, observed, max_batch_requests=2)

    async def main():
        return await asyncio.gather(*(service.submit(*job(encoder, [i])) for i in range(5)))

    assert asyncio.run(main()) == [[float(i)] for i in range(5)]
    assert [requests for requests, _, _ in observed] == [2, 2, 1]


def test_bad_input_fails_its_own_request_only():
    encoder, observed = CountingEncoder(), []
    service = batcher(encoder, observed)

    def too_long():
        raise RagmeshError(ErrorCode.QUERY_TOO_LONG, "inputs[0] must have at most 256 tokens; given 300")

    async def main():
        return await asyncio.gather(service.submit(*job(encoder, [1])), service.submit(too_long, lambda _: None),
                                    service.submit(*job(encoder, [2])), return_exceptions=True)

    first, refused, third = asyncio.run(main())
    assert (first, third) == ([1.0], [2.0])
    assert isinstance(refused, RagmeshError) and refused.code is ErrorCode.QUERY_TOO_LONG
    assert [requests for requests, _, _ in observed] == [2]


def test_a_model_failure_fails_every_request_of_its_pass_and_the_next_pass_is_served():
    encoder = CountingEncoder()
    service = batcher(encoder)

    async def main():
        failed = await asyncio.gather(service.submit(*job(encoder, [1])), service.submit(*job(encoder, [POISON])),
                                      service.submit(*job(encoder, [3])), return_exceptions=True)
        return failed, await service.submit(*job(encoder, [4]))

    failed, later = asyncio.run(main())
    assert all(isinstance(e, RagmeshError) and e.code is ErrorCode.RUNTIME_ERROR for e in failed)
    assert "batch of 3 requests" in failed[0].message
    assert later == [4.0]


def test_a_request_whose_client_left_is_not_computed():
    encoder = CountingEncoder()
    service = batcher(encoder)

    async def main():
        gone = asyncio.ensure_future(service.submit(*job(encoder, [7])))
        kept = asyncio.ensure_future(service.submit(*job(encoder, [8])))
        await asyncio.sleep(0)  # both queued; the worker has not taken them yet
        gone.cancel()
        return await kept

    assert asyncio.run(main()) == [8.0]
    assert encoder.passes == [[(8,)]]


def test_a_shut_down_executor_answers_unavailable():
    encoder = CountingEncoder()
    service = batcher(encoder)
    service._executor.shutdown()
    with pytest.raises(RagmeshError) as refused:
        asyncio.run(service.submit(*job(encoder, [1])))
    assert refused.value.code is ErrorCode.UNAVAILABLE


class GatedEncoder(CountingEncoder):
    """A CountingEncoder whose passes wait until the test opens the gate, so jobs queue meanwhile."""

    def __init__(self) -> None:
        super().__init__()
        self.in_pass = threading.Event()
        self.gate = threading.Event()

    def embed_sequences(self, sequences, normalize=True):
        self.in_pass.set()
        self.gate.wait(5)
        return super().embed_sequences(sequences, normalize)


async def queued(*submits) -> list[asyncio.Future]:
    """The submits started, in this order, and their jobs queued (submit queues before it awaits)."""
    started = [asyncio.ensure_future(submit) for submit in submits]
    await asyncio.sleep(0)
    return started


def test_an_interactive_job_waits_for_the_bulk_pass_in_flight_only_and_no_bulk_job_starves():
    encoder = GatedEncoder()
    service = batcher(encoder)

    async def main():
        bulk = await queued(*(service.submit(*job(encoder, [b] * 3), priority=BULK) for b in (1, 2, 3)))
        await asyncio.to_thread(encoder.in_pass.wait, 5)  # the first bulk job's pass holds the model
        interactive = await queued(service.submit(*job(encoder, [7])))
        encoder.gate.set()
        return await asyncio.gather(*bulk), await asyncio.gather(*interactive)

    bulk, interactive = asyncio.run(main())
    assert bulk == [[3.0], [6.0], [9.0]] and interactive == [[7.0]]
    # One bulk job per round: the interactive job went next, ahead of the two bulk jobs queued before it.
    assert encoder.passes == [[(1, 1, 1)], [(7,)], [(2, 2, 2)], [(3, 3, 3)]]


def test_each_round_serves_the_queued_interactive_jobs_then_one_bulk_job_in_a_pass_of_its_own():
    encoder, passes = GatedEncoder(), []

    def observe(requests, tokens, waits, priority):
        passes.append((priority, requests))

    service = DynamicBatcher(encoder, InferenceExecutor(), max_batch_tokens=10_000, max_batch_requests=2,
                             observe=observe)

    async def main():
        first = await queued(service.submit(*job(encoder, [0])))
        await asyncio.to_thread(encoder.in_pass.wait, 5)
        # Bulk queued first, interactive after: more interactive work than one round takes.
        later = await queued(*(service.submit(*job(encoder, [b]), priority=BULK) for b in (10, 20, 30)),
                             *(service.submit(*job(encoder, [i])) for i in range(1, 7)))
        encoder.gate.set()
        return await asyncio.gather(*first, *later)

    assert asyncio.run(main()) == [[0.0], [10.0], [20.0], [30.0], *([float(i)] for i in range(1, 7))]
    # Interactive jobs never share a pass with a bulk job, nor come after a queued one; still every
    # round serves the oldest bulk job, though interactive jobs are left queued.
    assert encoder.passes == [[(0,)], [(1,), (2,)], [(10,)], [(3,), (4,)], [(20,)], [(5,), (6,)], [(30,)]]
    assert passes == [(INTERACTIVE, 1), (INTERACTIVE, 2), (BULK, 1), (INTERACTIVE, 2), (BULK, 1),
                      (INTERACTIVE, 2), (BULK, 1)]


def test_a_failed_bulk_pass_fails_that_bulk_job_only():
    encoder = CountingEncoder()
    service = batcher(encoder)

    async def main():
        return await asyncio.gather(service.submit(*job(encoder, [1])),
                                    service.submit(*job(encoder, [POISON]), priority=BULK),
                                    service.submit(*job(encoder, [2]), priority=BULK),
                                    service.submit(*job(encoder, [3])), return_exceptions=True)

    first, failed, bulk, last = asyncio.run(main())
    assert (first, bulk, last) == ([1.0], [2.0], [3.0])
    assert isinstance(failed, RagmeshError) and failed.code is ErrorCode.RUNTIME_ERROR
    assert "batch of 1 requests" in failed.message
    assert encoder.passes == [[(1,), (3,)], [(POISON,)], [(2,)]]


def test_a_search_queued_during_a_bulk_pass_is_served_between_two_of_its_slices():
    encoder = GatedEncoder()
    service = batcher(encoder, bulk_slice_tokens=3)  # a slice per sequence below

    async def main():
        bulk = await queued(service.submit(*job(encoder, [1] * 3, [2] * 3, [3] * 3, [4] * 3), priority=BULK))
        await asyncio.to_thread(encoder.in_pass.wait, 5)  # the bulk job's first slice holds the model
        interactive = await queued(service.submit(*job(encoder, [7])))
        encoder.gate.set()
        return await asyncio.gather(*bulk), await asyncio.gather(*interactive)

    bulk, interactive = asyncio.run(main())
    assert bulk == [[3.0, 6.0, 9.0, 12.0]] and interactive == [[7.0]]
    assert encoder.passes == [[(1, 1, 1)], [(7,)], [(2, 2, 2)], [(3, 3, 3)], [(4, 4, 4)]]


def test_slices_cut_a_pass_at_about_the_token_budget():
    from ragmesh_runtime.batching import _slices

    sequences = [(1,) * 4, (2,) * 4, (3,) * 9, (4,) * 2]
    assert _slices(sequences, 8) == [[(1,) * 4, (2,) * 4], [(3,) * 9], [(4,) * 2]]
    assert _slices([], 8) == [[]]
