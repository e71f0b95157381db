"""Dynamic batching, as TEI does it: concurrent /embed and /rerank requests share one model pass.

A request becomes a job of two steps, both run on the inference thread: ``plan`` returns the model
input sequences the job needs (tokenizing, windowing, validating), ``run`` computes the job's answer
from them. Each time the inference thread is free the batcher takes a round of queued jobs, embeds
the union of a pass's sequences in one model pass (the encoder still splits it into ONNX runs of
bounded padded size), then runs each job of the pass against those vectors
(``MiniLmEncoder.reusing``). Nothing ever waits for company: a lone request starts at once, and
requests that arrive while the model is busy form the next round. Jobs join a pass while the tokens
the model must compute for it stay within ``max_batch_tokens`` (a job over it alone is a pass of its
own) and the pass holds at most ``max_batch_requests`` jobs (0: no limit, TEI's default).

A job is interactive (a search's query vector or rerank: the default) or bulk (an index build's
batch of chunks). A round is every queued interactive job, oldest first, up to
``max_batch_requests``, then the oldest bulk job in a pass of its own. So an interactive job waits
for at most the one bulk pass of the round in flight, never for a queue of bulk work, and does not
share a pass with a bulk job (a job's answer waits for its whole pass). Bulk work cannot starve:
every round serves one bulk job while any is queued, however many interactive jobs wait.

Errors stay with the job they belong to: a plan or run that raises fails its own request only; a
model pass that raises fails every request of that pass, with an error saying so, and the next
pass is served.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, Sequence

import numpy as np

from ragmesh_common.errors import ErrorCode, RagmeshError

log = logging.getLogger("ragmesh_runtime")

Sequences = list[Sequence[int]]


class Priority(enum.Enum):
    """Whose job goes first; the values are what the X-Ragmesh-Priority header says."""

    INTERACTIVE = "interactive"
    BULK = "bulk"


class BatchObserver(Protocol):
    def __call__(self, requests: int, tokens: int, queue_waits: Sequence[float], priority: Priority) -> None:
        """One model pass: its request count, the tokens the model computed, each request's wait,
        and the priority of its jobs (a pass holds jobs of one priority)."""


class PassEncoder(Protocol):
    """What the batcher needs of the encoder (ragmesh_runtime.encoder.MiniLmEncoder)."""

    def embed_sequences(self, sequences: Sequence[Sequence[int]], normalize: bool = True) -> np.ndarray: ...

    def is_cached(self, sequence: Sequence[int]) -> bool: ...

    def reusing(self, vectors: dict[tuple[int, ...], np.ndarray]) -> Any: ...


class InferenceRunner(Protocol):
    async def run(self, fn: Callable[..., Any], *args: Any) -> Any: ...


@dataclass(slots=True)
class Job:
    plan: Callable[[], Sequences]
    run: Callable[[Sequences], Any]
    future: asyncio.Future
    priority: Priority
    queued_at: float = field(default_factory=time.perf_counter)


class DynamicBatcher:
    def __init__(
        self, encoder: PassEncoder, executor: InferenceRunner, *, max_batch_tokens: int, max_batch_requests: int = 0,
        observe: BatchObserver | None = None, bulk_slice_tokens: int = 0,
    ) -> None:
        self._encoder = encoder
        self._executor = executor
        self._max_tokens = max_batch_tokens
        self._max_requests = max_batch_requests
        self._bulk_slice_tokens = bulk_slice_tokens
        self._observe = observe
        self._queues: dict[Priority, deque[Job]] = {priority: deque() for priority in Priority}
        self._worker: asyncio.Task | None = None

    async def submit(
        self, plan: Callable[[], Sequences], run: Callable[[Sequences], Any],
        priority: Priority = Priority.INTERACTIVE,
    ) -> Any:
        """The result of ``run(plan())``, computed in the next round that takes the job."""
        job = Job(plan, run, asyncio.get_running_loop().create_future(), priority)
        self._queues[priority].append(job)
        if self._worker is None:
            self._worker = asyncio.create_task(self._drain())
        return await job.future

    async def _drain(self) -> None:
        """Serve rounds while jobs are queued, then stop (the next submit starts a new worker)."""
        try:
            while any(self._queues.values()):
                jobs = self._take()
                if not jobs:
                    continue
                loop = asyncio.get_running_loop()
                try:
                    await self._executor.run(self._serve, jobs, loop)
                except RuntimeError:  # the executor shut down: the process is stopping
                    for job in jobs:
                        _settle(job, error=RagmeshError(ErrorCode.UNAVAILABLE, "runtime is shutting down"))
        finally:
            self._worker = None

    def _take(self) -> list[Job]:
        """The next round: the queued interactive jobs, then one bulk job."""
        queues = self._queues
        return _live(queues[Priority.INTERACTIVE], self._max_requests) + _live(queues[Priority.BULK], 1)

    # -- on the inference thread ----------------------------------------------------------------
    def _serve(self, jobs: list[Job], loop: asyncio.AbstractEventLoop) -> None:
        group: list[tuple[Job, Sequences]] = []
        seen: set[tuple[int, ...]] = set()
        tokens = 0
        for job in jobs:
            try:
                sequences = job.plan()
            except Exception as exc:  # bad input of this request only
                loop.call_soon_threadsafe(_settle, job, None, exc)
                continue
            new = {key for key in map(tuple, sequences) if key not in seen and not self._encoder.is_cached(key)}
            cost = sum(map(len, new))
            if group and (tokens + cost > self._max_tokens or job.priority is not group[0][0].priority):
                self._pass(group, tokens, loop)
                group, seen, tokens = [], set(), 0
            group.append((job, sequences))
            seen |= new
            tokens += cost
        if group:
            self._pass(group, tokens, loop)

    def _pass(self, group: list[tuple[Job, Sequences]], tokens: int, loop: asyncio.AbstractEventLoop) -> None:
        started = time.perf_counter()
        union = list(dict.fromkeys(tuple(s) for _, sequences in group for s in sequences))
        try:
            if group[0][0].priority is Priority.BULK and self._bulk_slice_tokens:
                vectors = self._sliced(union, loop)
            else:
                vectors = self._encoder.embed_sequences(union, normalize=False)
        except Exception as exc:
            log.exception("model pass over a batch of %d requests failed", len(group))
            error = RagmeshError(
                ErrorCode.RUNTIME_ERROR,
                f"Inference failed: the model pass over a batch of {len(group)} requests raised "
                f"{type(exc).__name__}; other batches are served",
            )
            for job, _ in group:
                loop.call_soon_threadsafe(_settle, job, None, error)
            return
        if self._observe is not None:
            waits = [started - job.queued_at for job, _ in group]
            self._observe(len(group), tokens, waits, group[0][0].priority)
        with self._encoder.reusing(dict(zip(union, vectors))):
            for job, sequences in group:
                try:
                    result = job.run(sequences)
                except Exception as exc:
                    loop.call_soon_threadsafe(_settle, job, None, exc)
                else:
                    loop.call_soon_threadsafe(_settle, job, result)

    def _sliced(self, union: list[tuple[int, ...]], loop: asyncio.AbstractEventLoop) -> np.ndarray:
        """A bulk pass's vectors, slice by slice; the interactive jobs queued by the end of a slice are
        served before the next one, so a search waits for one slice of a build's batch, not all of it.
        (The event loop appends to the interactive queue while this thread takes from it: a deque's
        append and popleft are atomic, and the loop takes from it only while this thread is idle.)"""
        parts = []
        for piece in _slices(union, self._bulk_slice_tokens):
            parts.append(self._encoder.embed_sequences(piece, normalize=False))
            waiting = _live(self._queues[Priority.INTERACTIVE], self._max_requests)
            if waiting:
                self._serve(waiting, loop)
        return np.concatenate(parts)


def _slices(sequences: list[tuple[int, ...]], tokens: int) -> list[list[tuple[int, ...]]]:
    """Consecutive runs of ``sequences`` of about ``tokens`` tokens each (at least one sequence)."""
    slices: list[list[tuple[int, ...]]] = [[]]
    size = 0
    for sequence in sequences:
        if slices[-1] and size + len(sequence) > tokens:
            slices.append([])
            size = 0
        slices[-1].append(sequence)
        size += len(sequence)
    return slices


def _live(queue: deque[Job], most: int) -> list[Job]:
    """Up to ``most`` jobs (0: all) from the front of ``queue``."""
    jobs: list[Job] = []
    while queue and (not most or len(jobs) < most):
        job = queue.popleft()
        if not job.future.done():  # a client that went away needs no answer
            jobs.append(job)
    return jobs


def _settle(job: Job, result: Any = None, error: BaseException | None = None) -> None:
    if job.future.done():  # cancelled meanwhile
        return
    if error is not None:
        job.future.set_exception(error)
    else:
        job.future.set_result(result)
