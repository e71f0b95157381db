"""bench/mesh_overhead.py's query sets, its copy of the runtime's vector cache and its reading of the
runtime's metrics (no processes started)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from prometheus_client import generate_latest
from tokenizers import Tokenizer

from ragmesh_bench.mesh_queries import query_pool, query_sets, scrub_runtime_cache
from ragmesh_bench.overhead_report import (
    EMBED_SPAN,
    LAYERS,
    SEARCH_SPANS,
    batch_counters,
    batching_of,
    cpu_ms_per_search,
    hop_breakdown,
    profile_shares,
    smoke_failures,
    top_frames,
)
from ragmesh_runtime.batching import Priority
from ragmesh_runtime.encoder import MiniLmEncoder, SequenceVectorCache
from ragmesh_runtime.http.metrics import RuntimeMetrics
from ragmesh_runtime.model_files import MINILM_TOKENIZER, verify


class _NoSession:
    def get_inputs(self) -> list:
        return []


@pytest.fixture
def encoder() -> MiniLmEncoder:
    """The runtime's own encoder, for its cache keys only (no model is loaded)."""
    tokenizer = Tokenizer.from_file(str(verify(MINILM_TOKENIZER).path))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    return MiniLmEncoder(_NoSession(), tokenizer, cache_entries=10)


def runtime_key(encoder: MiniLmEncoder, text: str) -> tuple[int, ...]:
    return tuple(encoder.sequence(encoder.token_ids([text])[0]))


def test_pool_puts_the_split_first_and_drops_repeats(tmp_path: Path) -> None:
    queries = [("q1", "train one"), ("q2", "test one"), ("q3", "train one"), ("q4", "test two"), ("q5", " ")]
    lines = [json.dumps({"_id": i, "text": t}) + "\n" for i, t in queries]
    (tmp_path / "queries.jsonl").write_text("".join(lines))
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"_id": "d", "title": "", "text": "x"}) + "\n")
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq2\td\t1\nq4\td\t1\n")

    assert query_pool(tmp_path, "test") == ["test one", "test two", "train one"]


def test_sets_are_disjoint_and_shrink_rather_than_repeat_a_query() -> None:
    pool = [f"q{i}" for i in range(25)]

    sets, warmup = query_sets(pool, 10, 2, 3)
    assert [len(s) for s in sets] == [10, 10] and len(warmup) == 3
    assert len(set(sets[0]) | set(sets[1]) | set(warmup)) == 23

    sets, warmup = query_sets(pool, 20, 2, 3)
    assert [len(s) for s in sets] == [11, 11]
    assert len(set(sets[0]) | set(sets[1]) | set(warmup)) == 25


def test_cache_copy_loses_exactly_the_queries_vectors(tmp_path: Path, encoder: MiniLmEncoder) -> None:
    cache = SequenceVectorCache(10)
    asked, other = "Does vitamin D raise bone density?", "Vitamin D\nBone density rises with vitamin D."
    cache.put(runtime_key(encoder, asked), np.ones(4, dtype=np.float32))
    cache.put(runtime_key(encoder, other), np.full(4, 2.0, dtype=np.float32))
    cache.save(tmp_path / "cache.npz", "sha")

    report = scrub_runtime_cache(tmp_path / "cache.npz", tmp_path / "copy.npz", [asked])

    copied = SequenceVectorCache(10)
    assert copied.load(tmp_path / "copy.npz", "sha") == 1
    assert copied.get(runtime_key(encoder, asked)) is None
    assert copied.get(runtime_key(encoder, other)).tolist() == [2.0] * 4
    assert report["entries"] == 2 and report["removed"] == 1


def test_no_cache_file_means_an_empty_cache(tmp_path: Path) -> None:
    report = scrub_runtime_cache(tmp_path / "missing.npz", tmp_path / "copy.npz", ["q"])
    assert report["removed"] == 0 and not (tmp_path / "copy.npz").exists()


def test_each_busy_sample_counts_once_for_the_layer_deepest_on_its_stack(tmp_path: Path) -> None:
    outer = "run_asgi (uvicorn/protocols/http/h11_impl.py:1);RequestContextMiddleware.__call__ (web/request_context.py:2)"
    grpc = f"{outer};SearchController.search (search/controllers.py:3);UnaryUnaryCall._invoke (grpc/aio/_call.py:4)"
    collapsed = tmp_path / "gateway.collapsed"
    collapsed.write_text("\n".join([
        f"{grpc} 6",
        f"{outer};AllowedHosts.__call__ (web/allowed_hosts.py:5) 2",
        "_bootstrap (threading.py:1);_worker (concurrent/futures/thread.py:2) 50",  # a pool worker waiting
        "<module> (app.py:1);_find_and_load (<frozen importlib._bootstrap>:2) 40",  # start-up
        "Thread.run (threading.py:1);BatchProcessor.worker (_shared_internal/__init__.py:2);export (x.py:3) 2",
    ]) + "\n")

    shares = profile_shares(collapsed)
    assert shares["busy_samples"] == 10
    pct = shares["share_pct"]
    assert pct["gRPC calls (grpc.aio, protobuf)"] == 60.0
    assert pct["host check"] == 20.0 and pct["span export thread (span file)"] == 20.0
    assert pct["search pipeline, own work"] == 0.0 and pct["request context: request id, metrics, access log"] == 0.0


def test_top_frames_ranks_the_deepest_frame_of_busy_samples(tmp_path: Path) -> None:
    collapsed = tmp_path / "runtime.txt"
    collapsed.write_text(
        "main (app.py:1);serve (s.py:2);run (onnx.py:3) 6\n"
        "main (app.py:1);serve (s.py:2);_bm25 (relevance.py:4) 3\n"
        "main (app.py:1);_worker (thread.py:5) 50\n"  # a pool thread waiting: not busy
        "main (app.py:1);_find_and_load (imp.py:6);load (x.py:7) 9\n"  # start-up
        "main (app.py:1);serve (s.py:2) 1\n")
    assert top_frames(collapsed) == {"busy_samples": 10, "top_pct": {
        "run (onnx.py:3)": 60.0, "_bm25 (relevance.py:4)": 30.0, "serve (s.py:2)": 10.0}}
    assert list(top_frames(collapsed, most=1)["top_pct"]) == ["run (onnx.py:3)"]


def test_batching_counts_the_passes_of_a_pass_and_a_runtime_that_does_not_batch() -> None:
    before = {"passes": 10.0, "requests": 12.0, "wait_s": 0.5}
    after = {"passes": 14.0, "requests": 32.0, "wait_s": 1.5}
    assert batching_of(before, after) == {"batched": True, "model_passes": 4, "requests": 20,
                                          "requests_per_pass": 5.0, "mean_queue_wait_ms": 50.0}
    assert batching_of({}, {}) == {"batched": False}


def test_batch_counters_sum_the_runtime_s_passes_over_their_priorities() -> None:
    metrics = RuntimeMetrics()  # the runtime's own exposition, so a renamed metric fails here
    metrics.observe_batch(3, 30, [0.1, 0.2, 0.3], Priority.INTERACTIVE)
    metrics.observe_batch(1, 200, [1.0], Priority.BULK)
    counters = batch_counters(generate_latest(metrics.registry).decode())
    assert counters == {"passes": 2.0, "requests": 4.0, "wait_s": pytest.approx(1.6)}
    assert batch_counters("# TYPE other_total counter\nother_total 3.0\n") == {}


def test_cpu_per_search_is_each_process_s_share_and_their_total() -> None:
    before = {"gateway": 10.0, "retrieval": 4.0, "runtime": 20.0, "bench": 1.0}
    after = {"gateway": 10.4, "retrieval": 4.3, "runtime": 21.0, "bench": 1.1}  # a process gone: left out
    assert cpu_ms_per_search(before, after, 100) == {"gateway": 4.0, "retrieval": 3.0, "runtime": 10.0,
                                                     "bench": 1.0, "total": 18.0}
    assert cpu_ms_per_search(before, {k: v for k, v in after.items() if k != "runtime"}, 100)["total"] == 8.0
    assert cpu_ms_per_search(before, after, 0) == {}


CPU = {"gateway": 4.0, "retrieval": 3.0, "rerank": 1.0, "runtime": 10.0, "bench": 1.0, "total": 19.0}


def test_the_smoke_check_names_a_missing_pass_and_an_error() -> None:
    def line(path: str, level: int, errors: int = 0) -> dict:
        return {"kind": "pass", "path": path, "concurrency": level, "requests": 4, "errors": errors, "p50_ms": 1.0,
                "cpu_ms_per_search": CPU}

    lines = [line(p, 1) for p in ("gateway_fresh", "gateway_warm", "inprocess_warm", *LAYERS)]
    lines.append({"kind": "ratio", "concurrency": 1, "same_results": 1.0})
    lines.append({"kind": "hops", "concurrency": 1, "path": "gateway_warm", "searches": 4})
    assert smoke_failures(lines, [1]) == []
    assert smoke_failures(lines[1:], [1]) == ["no gateway_fresh pass at 1 clients"]
    assert smoke_failures(lines[:-1] + [{"kind": "hops", "concurrency": 1, "path": "gateway_warm", "searches": 0}], [1]) == [
        "no hops line with searches at 1 clients (span names changed?)"]
    lines[1] = line("gateway_warm", 1, errors=2)
    (problem,) = smoke_failures(lines, [1])
    assert problem.startswith("gateway_warm at 1 clients")
    lines[1] = {**line("gateway_warm", 1), "cpu_ms_per_search": {"bench": 1.0, "total": 1.0}}
    assert smoke_failures(lines, [1]) == ["gateway_warm at 1 clients: no CPU per search of the mesh's processes"]


def _search_spans(trace: str, start_ms: float, ms: dict[str, float]) -> list[dict]:
    """One search's spans as the processes write them, each starting at start_ms (ms since 0)."""
    # The names the processes write are SEARCH_SPANS'; the smoke pass checks them against a real mesh.
    names = {**SEARCH_SPANS, "query_embedding": ("ragmesh-retrieval", "CLIENT", "embeddings all-MiniLM-L6-v2-onnx-int8"),
             "runtime_embed": EMBED_SPAN}
    start = int(start_ms * 1e6)
    return [{"trace_id": trace, "span_id": role, "service": service, "kind": kind, "name": name,
             "start_ns": start, "end_ns": start + int(ms[role] * 1e6)}
            for role, (service, kind, name) in names.items() if role in ms]


def test_the_hops_of_a_search_are_its_spans_less_what_they_call() -> None:
    one = {"gateway": 26.0, "retrieval_call": 12.0, "retrieval": 10.0, "store": 7.5, "query_embedding": 0.5,
           "rerank_call": 10.0, "rerank": 8.0, "runtime_call": 6.0, "runtime": 4.0}
    spans = _search_spans("a", 1000, one) + _search_spans("b", 1010, {**one, "gateway": 30.0, "store": 8.5})
    spans += _search_spans("early", 10, one)  # before the window
    spans += _search_spans("partial", 1020, {k: v for k, v in one.items() if k != "runtime"})  # a span missing
    found = hop_breakdown(spans, int(1000 * 1e6), int(2000 * 1e6))
    assert found == {"searches": 2, "gateway_ms": 28.0, "median_ms": {
        "gateway_own": 6.0, "retrieval_hop": 2.0, "retrieval_own": 1.5, "store": 8.0, "rerank_hop": 2.0,
        "rerank_own": 2.0, "runtime_hop": 2.0, "runtime": 4.0},
        # the slower of the two searches ("b": 30 ms, its store 8.5)
        "slowest_tenth_ms": {"gateway_own": 8.0, "retrieval_hop": 2.0, "retrieval_own": 1.0, "store": 8.5,
                             "rerank_hop": 2.0, "rerank_own": 2.0, "runtime_hop": 2.0, "runtime": 4.0}}
    assert hop_breakdown(spans, 0, int(5 * 1e6)) == {"searches": 0}


def test_fresh_searches_add_the_query_embedding_hops_and_the_tail_is_the_slowest_tenth() -> None:
    fresh = {"gateway": 40.0, "retrieval_call": 26.0, "retrieval": 24.0, "store": 7.5, "query_embedding": 14.0,
             "runtime_embed": 11.0, "rerank_call": 10.0, "rerank": 8.0, "runtime_call": 6.0, "runtime": 4.0}
    spans = [span for i in range(19) for span in _search_spans(f"t{i}", 1000 + i, fresh)]
    spans += _search_spans("slow", 1100, {**fresh, "gateway": 90.0, "runtime_embed": 51.0, "query_embedding": 55.0,
                                          "retrieval": 65.0, "retrieval_call": 67.0})
    found = hop_breakdown(spans, int(1000 * 1e6), int(2000 * 1e6))
    assert found["searches"] == 20
    assert found["median_ms"]["embed_hop"] == 3.0 and found["median_ms"]["runtime_embed"] == 11.0
    assert found["slowest_tenth_ms"]["runtime_embed"] == 31.0  # the slow one and one of the others
    assert found["median_ms"]["retrieval_own"] == 2.5  # its span less the store and the embedding call


def test_garbage_collections_are_read_per_process_and_counted_between_two_readings() -> None:
    from prometheus_client import CollectorRegistry, Gauge, Histogram

    from ragmesh_bench.overhead_report import gc_counters, gc_pauses

    registry = CollectorRegistry()
    pauses = Histogram("ragmesh_gc_pause_seconds", "", ["generation"], registry=registry)
    Gauge("ragmesh_gc_frozen_objects", "", registry=registry).set(120_000)
    for generation in "012":
        pauses.labels(generation).observe(0.001)
    before = gc_counters(generate_latest(registry).decode())
    pauses.labels("2").observe(0.040)
    pauses.labels("2").observe(0.020)
    pauses.labels("0").observe(0.0005)
    after = gc_counters(generate_latest(registry).decode())
    assert before["count2"] == 1 and after["count2"] == 3 and after["frozen"] == 120_000
    report = gc_pauses({"gateway": before, "runtime": {}}, {"gateway": after, "runtime": {}, "rerank": after})
    # A process without the metric (an older build), or read only once, is left out.
    assert report == {"gateway": {"full": 2, "full_ms": 60.0, "all_ms": 60.5}}
