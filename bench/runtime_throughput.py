"""Embedding throughput of the CPU model runtime: /embed with batches of 32 passages of 100 words.

Measured twice: in-process (RuntimeService.embed, i.e. everything but HTTP) and over HTTP against
a real `python -m ragmesh_runtime` on a free port. Prints one JSON line.

    .venv/bin/python bench/runtime_throughput.py [--batches 8] [--batch-size 32] [--words 100]

The 1-minute load average is printed too: on a shared machine it explains slow runs.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx

from ragmesh_bench.harness import RunningMesh, serve
from ragmesh_bench.smoke import parse_args
from ragmesh_runtime.models import load_models
from ragmesh_runtime.service import RuntimeService
from ragmesh_runtime.settings import RuntimeSettings

# Common English words, so passages tokenize like prose (about 1.0-1.3 WordPiece tokens a word).
WORDS = """the of and to in is that for it as was with be by on not he this are or his from at which but
have an they you were her she there one all we their can has more when will if no out so said what up
its about into than them only other new some could time these two may then do first any my now such like
our over man me even most made after also did many before must through back years where much your way
well down should because each just those people how too little state good very make world still own see
men work long get here between both life being under never day same another know while last might us
great old year off come since against go came right used take three system service index query vector
document answer source model runtime cache network storage memory request response latency""".split()


def passages(count: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "." for _ in range(count)]


async def in_process(settings: RuntimeSettings, batches: list[list[str]]) -> tuple[float, float]:
    service = RuntimeService(load_models(settings), settings)
    try:
        await service.embed(batches[0], normalize=True, truncate=True)  # warm-up
        started = time.perf_counter()
        for batch in batches:
            await service.embed(batch, normalize=True, truncate=True)
        elapsed = time.perf_counter() - started
        tokens = sum(len(ids) + 2 for b in batches for ids in service.models.encoder.token_ids(b))
        return sum(map(len, batches)) / elapsed, tokens / sum(map(len, batches))
    finally:
        service.close()


@contextlib.contextmanager
def started_runtime() -> Iterator[str]:
    """A `python -m ragmesh_runtime` of its own on a free port; yields its base URL."""
    def start(port: int) -> subprocess.Popen:
        env = {**os.environ, "RAGMESH_RUNTIME_PORT": str(port), "RAGMESH_LOG_LEVEL": "warning"}
        return subprocess.Popen([sys.executable, "-m", "ragmesh_runtime"], env=env)

    port, server = serve(start, "/health", timeout=90)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(timeout=30)


def over_http(base: str, batches: list[list[str]]) -> float:
    with httpx.Client(base_url=base, timeout=120) as client:
        client.post("/embed", json={"inputs": batches[0], "truncate": True}).raise_for_status()
        started = time.perf_counter()
        for batch in batches:
            response = client.post("/embed", json={"inputs": batch, "truncate": True})
            response.raise_for_status()
            assert len(response.json()) == len(batch)
        return sum(map(len, batches)) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--words", type=int, default=100)
    args = parse_args(parser)
    if args.smoke:  # a few small batches; over HTTP, the running mesh's runtime
        args.batches, args.batch_size, args.words = 2, 4, 20
    settings = RuntimeSettings.from_env()
    texts = passages(args.batches * args.batch_size, args.words, seed=7)
    batches = [texts[i : i + args.batch_size] for i in range(0, len(texts), args.batch_size)]
    load_before = os.getloadavg()[0]
    in_process_rate, tokens_per_passage = asyncio.run(in_process(settings, batches))
    if args.smoke:
        http_rate = over_http(RunningMesh.from_env().runtime_url, batches)
    else:
        with started_runtime() as base:
            http_rate = over_http(base, batches)
    print(
        json.dumps(
            {
                "bench": "runtime_throughput",
                "endpoint": "/embed",
                "batch_size": args.batch_size,
                "words_per_passage": args.words,
                "tokens_per_passage": round(tokens_per_passage, 1),
                "passages": len(texts),
                "in_process_passages_per_s": round(in_process_rate, 1),
                "http_passages_per_s": round(http_rate, 1),
                "intra_op_threads": settings.embedding.threads,
                "cpu_count": os.cpu_count(),
                "load_avg_1m_before": round(load_before, 2),
            }
        )
    )


if __name__ == "__main__":
    main()
