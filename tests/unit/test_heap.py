"""ragmesh_common.heap: startup objects frozen, every collection timed into the registry asked for.

Each check runs in a process of its own: a frozen object is never collected, so freezing this test
process would keep every later test's garbage cycles alive."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_startup_objects_are_frozen_and_the_full_collections_after_them_are_timed() -> None:
    out = run("""
        import gc, json
        from prometheus_client import CollectorRegistry, generate_latest
        from prometheus_client.parser import text_string_to_metric_families
        from ragmesh_common.heap import freeze_startup_objects

        registry = CollectorRegistry()  # as the runtime passes its own
        tracked_before = len(gc.get_objects())
        freeze_startup_objects(registry)
        frozen = freeze_startup_objects(registry)  # a second call registers nothing twice
        tracked_after = len(gc.get_objects())
        for _ in range(3):
            a, b = [], []
            a.append(b); b.append(a)  # a cycle only the collector frees
            del a, b
            gc.collect()
        kept = [[i] for i in range(10_000)]  # enough new containers for a young collection
        samples = {(s.name, s.labels.get("generation")): s.value
                   for f in text_string_to_metric_families(generate_latest(registry).decode()) for s in f.samples}
        print(json.dumps({"frozen": frozen, "tracked_before": tracked_before, "tracked_after": tracked_after,
                          "gauge": samples[("ragmesh_gc_frozen_objects", None)],
                          "full": samples[("ragmesh_gc_pause_seconds_count", "2")],
                          "full_s": samples[("ragmesh_gc_pause_seconds_sum", "2")],
                          "young": samples[("ragmesh_gc_pause_seconds_count", "0")]}))
    """)
    assert out["frozen"] > 10_000 and out["gauge"] == out["frozen"]
    # A full collection no longer walks them: the collector tracks only what came after.
    assert out["tracked_after"] < out["tracked_before"] / 10
    assert out["full"] >= 3 and out["full_s"] > 0
    assert out["young"] >= 1


def test_the_default_registry_gets_the_series_and_a_second_call_times_each_collection_once() -> None:
    out = run("""
        import gc, json
        from prometheus_client import REGISTRY
        from ragmesh_common.heap import freeze_startup_objects

        freeze_startup_objects()
        freeze_startup_objects()
        before = REGISTRY.get_sample_value("ragmesh_gc_pause_seconds_count", {"generation": "2"})
        gc.collect()
        after = REGISTRY.get_sample_value("ragmesh_gc_pause_seconds_count", {"generation": "2"})
        print(json.dumps({"one_collection": after - before}))
    """)
    assert out["one_collection"] == 1


def test_ragmesh_gc_freeze_false_leaves_the_objects_to_the_collector_and_still_times_it() -> None:
    out = run("""
        import gc, json, os
        os.environ["RAGMESH_GC_FREEZE"] = "false"
        from prometheus_client import REGISTRY
        from ragmesh_common.heap import freeze_startup_objects

        frozen = freeze_startup_objects()
        gc.collect()
        print(json.dumps({"frozen": frozen, "gauge": REGISTRY.get_sample_value("ragmesh_gc_frozen_objects"),
                          "full": REGISTRY.get_sample_value("ragmesh_gc_pause_seconds_count", {"generation": "2"})}))
    """)
    assert out == {"frozen": 0, "gauge": 0.0, "full": 1.0}
