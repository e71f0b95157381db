"""The indexer's alerting metrics (deploy/observability/alerts.yml) record what its builds, gates and
promotions did, against real PostgreSQL, a local Qdrant store and the real CPU runtime.

Metrics are process-wide, so each test uses a corpus of its own and reads the samples of that corpus.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from prometheus_client import REGISTRY

from ragmesh_common.errors import ErrorCode, RagmeshError
from ragmesh_indexer import metrics
from ragmesh_indexer.promotion import Promoter
from ragmesh_indexer.registry import CorpusSpec

DURATION = "ragmesh_index_build_duration_seconds"
AGE = "ragmesh_index_active_version_age_seconds"


def new_spec(root: Path | str) -> CorpusSpec:
    library = f"metrics{uuid.uuid4().hex[:8]}"
    return CorpusSpec(id=f"{library}@1.0", library=library, version="1.0", root=str(root))


def builds(corpus: str, outcome: str) -> float | None:
    return REGISTRY.get_sample_value(f"{DURATION}_count", {"corpus": corpus, "outcome": outcome})


def embedded(corpus: str) -> float | None:
    return REGISTRY.get_sample_value("ragmesh_index_chunks_embedded_total", {"corpus": corpus})


def gate_failures(corpus: str, gate: str) -> float | None:
    return REGISTRY.get_sample_value("ragmesh_index_gate_failures_total", {"corpus": corpus, "gate": gate})


async def build(indexer, spec: CorpusSpec, **kw):
    return await indexer.builder.build(spec, force=False, actor="test", reason="test", **kw)


async def ship(indexer, spec: CorpusSpec):
    out = await build(indexer, spec)
    passed, gates = await indexer.validator.validate(spec.id, out.index_version)
    assert passed, [g for g in gates if not g.passed]
    await indexer.promoter.promote(spec.id, out.index_version, actor="test", reason="test")
    return out


async def test_a_build_records_its_duration_by_outcome_and_the_chunks_it_embedded(indexer, corpus_copy) -> None:
    spec = new_spec(corpus_copy)
    first = await build(indexer, spec)
    assert first.embedded == first.chunks > 0
    assert builds(spec.id, "built") == 1
    assert REGISTRY.get_sample_value(f"{DURATION}_sum", {"corpus": spec.id, "outcome": "built"}) > 0
    assert embedded(spec.id) == first.embedded
    # The other outcomes are exported at zero from the corpus's first build on.
    assert builds(spec.id, "reused") == builds(spec.id, "failed") == builds(spec.id, "cancelled") == 0

    again = await build(indexer, spec)
    assert again.reused_existing
    assert builds(spec.id, "reused") == 1 and builds(spec.id, "built") == 1
    assert embedded(spec.id) == first.embedded  # nothing went through the model again


async def test_failed_builds_count_and_refused_requests_and_dry_runs_do_not(indexer, corpus_copy, tmp_path) -> None:
    spec = new_spec(corpus_copy)
    await build(indexer, spec, dry_run=True)
    assert builds(spec.id, "built") is None  # a dry run is no build
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "blank.md").write_text("", encoding="utf-8")
    failing = new_spec(empty)
    with pytest.raises(RagmeshError) as exc:
        await build(indexer, failing)
    assert exc.value.code == ErrorCode.BUILD_FAILED
    assert builds(failing.id, "failed") == 1 and builds(failing.id, "built") == 0
    # An unknown corpus without a folder is the caller's mistake: no series for it at all.
    unknown = new_spec("")
    with pytest.raises(RagmeshError):
        await build(indexer, unknown)
    assert builds(unknown.id, "failed") is None


async def test_a_failed_gate_is_counted_by_gate(indexer, corpus_copy) -> None:
    spec = new_spec(corpus_copy)
    await ship(indexer, spec)
    assert all(gate_failures(spec.id, gate) == 0 for gate in metrics.BLOCKING_GATES)
    (corpus_copy / "guide" / "install.md").write_text("# Installing Quokka\n\nNew text about installation.\n")
    built = await build(indexer, spec)
    # The file changes again after the build: its quotes no longer sit at their lines.
    (corpus_copy / "guide" / "install.md").write_text("# Moved\n\n\n\nsomething else entirely\n")
    passed, _ = await indexer.validator.validate(spec.id, built.index_version)
    assert not passed
    assert gate_failures(spec.id, "quotes_at_lines") == 1
    assert gate_failures(spec.id, "point_count") == gate_failures(spec.id, "probes") == 0
    assert gate_failures(spec.id, "internal_links") is None  # reported, never blocking


async def test_active_version_age_is_read_from_the_registry(indexer, corpus_copy) -> None:
    spec = new_spec(corpus_copy)
    out = await build(indexer, spec)
    await indexer.validator.validate(spec.id, out.index_version)
    assert REGISTRY.get_sample_value(AGE, {"corpus": spec.id}) is None  # nothing serves yet
    await indexer.promoter.promote(spec.id, out.index_version, actor="test", reason="test")
    assert REGISTRY.get_sample_value(AGE, {"corpus": spec.id}) >= 0

    # A restarted indexer knows nothing but the registry: the age comes from the promotion time.
    promoted_at = (await indexer.registry.active_version(spec.id)).promoted_at
    later = promoted_at + timedelta(days=3)
    restarted = metrics.ActiveVersionAges(clock=later.timestamp)
    await metrics.refresh_active_ages(indexer.registry, restarted)
    (family,) = restarted.collect()
    ages = {sample.labels["corpus"]: sample.value for sample in family.samples}
    assert ages[spec.id] == timedelta(days=3).total_seconds()


async def test_a_rollback_serves_the_age_of_the_version_it_reactivates(indexer, corpus_copy) -> None:
    spec = new_spec(corpus_copy)
    await ship(indexer, spec)
    (corpus_copy / "guide" / "extra.md").write_text("# Extra\n\nQuokka supports cron-style schedules.\n")
    await ship(indexer, spec)
    ages = metrics.ActiveVersionAges(clock=lambda: datetime(2100, 1, 1, tzinfo=timezone.utc).timestamp())
    promoter = Promoter(indexer.registry, indexer.store, retire_after=timedelta(hours=1), active_ages=ages)
    await promoter.rollback(spec.id, actor="test", reason="bad release")
    active = await indexer.registry.active_version(spec.id)
    (family,) = ages.collect()
    (sample,) = family.samples
    assert sample.labels == {"corpus": spec.id}
    assert sample.value == datetime(2100, 1, 1, tzinfo=timezone.utc).timestamp() - active.promoted_at.timestamp()
