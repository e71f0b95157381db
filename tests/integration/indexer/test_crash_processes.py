"""Crash safety with real processes: the indexer process is killed (exit 137, no cleanup) at thirteen
points of `ragmesh index ci` and `ragmesh index rollback` — while parsing, embedding, writing,
validating and inside promote and rollback — against the real retrieval process, PostgreSQL and
the CPU runtime.

After every kill: the registry still has exactly one active version; what the alias serves is
the old version, or, where the registry had already committed the move, the alias is allowed to
lag until the restarted indexer reconciles it to the registry's active version. After the restart
no half-built candidate is left, and rerunning `ragmesh index ci` completes and serves the new
content. Only the indexer restarts; retrieval and the runtime serve throughout.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from indexer_stack import IndexerStack

ROOT = Path(__file__).resolve().parents[3]
CORPUS = "quokka@1.0"

# (checkpoint, the registry has committed a serving move when the process dies there)
KILL_POINTS = [
    ("parsed-file#2", False),  # during parsing (armed through RAGMESH_INDEXER_FAULT_AT)
    ("chunked", False),
    ("manifest-written", False),
    ("candidate-created", False),
    ("embed-batch#2", False),  # during embedding
    ("collection-created", False),
    ("upserted-batch#2", False),  # during upsert
    ("built", False),
    ("validated-gates", False),
    ("promote-start", False),  # inside promote, before the registry transaction
    ("promote-committed", True),  # inside promote, between the registry commit and the alias swap
    ("promote-aliased", True),  # inside promote, after the alias swap, before retirement
]


def step_page(i: int) -> str:
    """A page of four sections, four chunks: enough for several embed and upsert batches."""
    parts = [f"# Step {i}\n"]
    for s in range(4):
        words = " ".join(f"quokka{i}term{s}w{k}" for k in range(60))
        parts.append(f"\n## Part {s} of step {i}\n\nStep {i} part {s} covers {words}.\n")
    return "".join(parts)


@pytest.fixture
async def stack(tmp_path: Path, runtime_url: str, pg_url: str, unique_schema):
    # Small batches, so that "the second embed batch" and "the second upsert" exist in a small corpus.
    s = IndexerStack(tmp_path, runtime_url=runtime_url, pg_url=pg_url, schema=unique_schema("crash"),
                     env={"RAGMESH_INDEXER_EMBED_BATCH": "2", "RAGMESH_INDEXER_UPSERT_BATCH": "3"})
    s.start()
    yield s
    s.stop()
    await s.close()


async def _one_active(stack: IndexerStack) -> dict:
    rows = await stack.versions(CORPUS)
    active = [r for r in rows if r["state"] == "active"]
    assert len(active) == 1, rows
    return active[0]


async def _serves_file(stack: IndexerStack, collection: str, path: str) -> bool:
    points, _ = await stack.store.scroll(collection, limit=1000)
    return any(p.payload.get("source_path") == path for p in points)


@pytest.mark.timeout(900)
async def test_killed_indexer_never_changes_what_serves_and_a_rerun_completes(stack: IndexerStack,
                                                                               tmp_path: Path) -> None:
    source = tmp_path / "corpus"
    shutil.copytree(ROOT / "tests" / "fixtures" / "e2e_corpus", source)
    ci = ("index", "ci", "--corpus", CORPUS, "--source", str(source))
    await asyncio.to_thread(stack.cli_json, *ci)
    await _one_active(stack)

    for i, (point, committed) in enumerate(KILL_POINTS):
        (source / f"step-{i}.md").write_text(step_page(i), encoding="utf-8")
        before = await _one_active(stack)
        assert await stack.served(CORPUS) == before["collection"]
        if i == 0:  # the environment variable, fixed for the life of the process
            stack.mesh.stop_one("indexer")
            stack.start_indexer(RAGMESH_INDEXER_FAULT_AT=point)
        else:  # armed in the running process, so the restart below runs clean
            stack.arm(point)

        killed = await asyncio.to_thread(stack.cli, *ci)
        assert killed.returncode != 0, (point, killed.stdout)
        assert stack.wait_indexer_exit() == 137, point

        active = await _one_active(stack)
        served = await stack.served(CORPUS)
        if committed:
            assert active["index_version"] != before["index_version"], point
            assert served in (before["collection"], active["collection"]), point
        else:
            assert active["index_version"] == before["index_version"], point
            assert served == before["collection"], point

        stack.start_indexer()  # start-up recovery: fail half-built candidates, reconcile the alias
        assert not stack.fault_file.exists()
        active = await _one_active(stack)
        assert await stack.served(CORPUS) == active["collection"], point
        rows = await stack.versions(CORPUS)
        assert not [r for r in rows if r["state"] == "candidate" and not r["chunks"]], (point, rows)

        rerun = await asyncio.to_thread(stack.cli, *ci)
        assert rerun.returncode == 0, (point, rerun.stderr[-3000:])
        active = await _one_active(stack)
        assert await stack.served(CORPUS) == active["collection"], point
        assert await _serves_file(stack, active["collection"], f"step-{i}.md"), point

    # Inside rollback: the registry swapped active and previous, the alias still serves the old one.
    before = await _one_active(stack)
    stack.arm("rollback-committed")
    killed = await asyncio.to_thread(stack.cli, "index", "rollback", "--corpus", CORPUS)
    assert killed.returncode != 0 and stack.wait_indexer_exit() == 137
    active = await _one_active(stack)
    assert active["index_version"] != before["index_version"]
    assert await stack.served(CORPUS) in (before["collection"], active["collection"])
    stack.start_indexer()
    assert await stack.served(CORPUS) == (await _one_active(stack))["collection"]
    # Rebuilding unchanged content promotes the rolled-back version again (a roll-forward).
    rerun = await asyncio.to_thread(stack.cli, *ci)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    active = await _one_active(stack)
    assert active["index_version"] == before["index_version"]
    assert await stack.served(CORPUS) == active["collection"]
