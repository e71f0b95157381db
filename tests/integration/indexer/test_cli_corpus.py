"""`ragmesh corpus add|verify` and `ragmesh index ci|diff|promote` as a user runs them: the CLI
process against the indexer and retrieval processes, PostgreSQL and the CPU runtime."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from indexer_stack import IndexerStack

ROOT = Path(__file__).resolve().parents[3]
CORPUS = "mixed@1.0"


@pytest.fixture
async def stack(tmp_path: Path, runtime_url: str, pg_url: str, unique_schema):
    s = IndexerStack(tmp_path, runtime_url=runtime_url, pg_url=pg_url, schema=unique_schema("cli"))
    s.start()
    yield s
    s.stop()
    await s.close()


async def cli(stack: IndexerStack, *args: str):
    return await asyncio.to_thread(stack.cli, *args)


@pytest.mark.timeout(600)
async def test_add_promote_verify_ci_and_diff_through_the_cli(stack: IndexerStack, tmp_path: Path) -> None:
    source = tmp_path / "mixed"
    shutil.copytree(ROOT / "tests" / "fixtures" / "mixed_corpus", source)
    add = ("corpus", "add", "--library", "mixed", "--version", "1.0", "--source", str(source),
           "--license", "CC-BY-4.0", "--source-url", "https://example.org/mixed", "--visibility", "internal")
    manifests = tmp_path / "state" / "manifests"

    dry = await cli(stack, *add, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["dry_run"] is True
    files = {f["path"]: f for f in report["build"]["files"]}
    assert files["logo.png"]["status"] == "archived" and files["logo.png"]["reason"] == "binary"
    assert files["guide/intro.md"]["chunks"] > 0
    assert "archived logo.png: binary" in dry.stderr
    assert await stack.versions(CORPUS) == [] and not manifests.exists()
    assert await stack.served(CORPUS) == ""

    added = await cli(stack, *add)
    assert added.returncode == 0, added.stderr
    out = json.loads(added.stdout)
    version = out["build"]["index_version"]
    assert out["validation"]["passed"] is True
    assert out["promote_command"] == f"ragmesh index promote --corpus {CORPUS} --index-version {version}"
    assert f"next: {out['promote_command']}" in added.stderr
    assert [(r["index_version"], r["state"]) for r in await stack.versions(CORPUS)] == [(version, "validated")]
    assert await stack.served(CORPUS) == ""  # adding never promotes
    assert (manifests / CORPUS / f"{version}.json").is_file()

    promoted = await cli(stack, *out["promote_command"].split()[1:])
    assert promoted.returncode == 0, promoted.stderr
    assert (await stack.served(CORPUS)).endswith(version)

    verified = await cli(stack, "corpus", "verify", "--corpus", CORPUS)
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True
    (source / "notes.txt").write_text("Notes rewritten after the build.\n", encoding="utf-8")
    (source / "guide" / "extra.md").write_text("# Extra\n\nA page added after the build.\n", encoding="utf-8")
    drifted = await cli(stack, "corpus", "verify", "--corpus", CORPUS)
    assert drifted.returncode == 1
    assert {(d["path"], d["change"]) for d in json.loads(drifted.stdout)["drift"]} == {
        ("notes.txt", "changed"), ("guide/extra.md", "added")}

    ci = await cli(stack, "index", "ci", "--corpus", CORPUS)
    assert ci.returncode == 0, ci.stderr
    second = json.loads(ci.stdout)["build"]["index_version"]
    assert (await stack.served(CORPUS)).endswith(second)
    diff = await cli(stack, "index", "diff", "--corpus", CORPUS, "--from", version, "--to", second)
    assert diff.returncode == 0, diff.stderr
    changes = {f["path"]: f for f in json.loads(diff.stdout)["files"]}
    assert {p: c["change"] for p, c in changes.items()} == {"notes.txt": "changed", "guide/extra.md": "added"}
    assert changes["guide/extra.md"]["to_chunks"] == 1
    assert "+ guide/extra.md (1 chunk)" in diff.stderr

    # Any failure is a non-zero exit and leaves the alias alone: a file without text fails the build...
    (source / "guide" / "empty.md").write_text("---\ntitle: nothing else\n---\n", encoding="utf-8")
    failed = await cli(stack, "index", "ci", "--corpus", CORPUS)
    assert failed.returncode == 1 and "guide/empty.md" in failed.stderr
    (source / "guide" / "empty.md").unlink()
    # ...and so does a failing gate (a probe expecting a page that does not answer it).
    (source / ".ragmesh-probes.yaml").write_text(
        "probes:\n  - query: installation steps\n    expect: no-such-page.md\n", encoding="utf-8")
    (source / "notes.txt").write_text("Notes rewritten once more.\n", encoding="utf-8")
    gated = await cli(stack, "index", "ci", "--corpus", CORPUS)
    assert gated.returncode == 1 and "gate probes: FAIL" in gated.stderr
    assert json.loads(gated.stdout)["promoted"] is False
    assert (await stack.served(CORPUS)).endswith(second)

    usage = await cli(stack, "corpus", "add", "--library", "x", "--version", "1", "--source", str(source))
    assert usage.returncode == 2  # required options missing
    unknown = await cli(stack, "corpus", "verify", "--corpus", "nobody@0")
    assert unknown.returncode == 2 and "NOT_FOUND" in unknown.stderr


@pytest.mark.parametrize("command", [("index", "ci"), ("index", "build")])
def test_a_corpus_folder_that_is_not_there_is_named_before_any_call(tmp_path: Path, command) -> None:
    # A path that is no folder here is not a corpus id (ids are library@version, never a path): in a
    # container it is most often a corpora folder that was not mounted. Nothing listens at --addr.
    import subprocess
    import sys

    missing = tmp_path / "handbook"
    result = subprocess.run(
        [sys.executable, "-m", "ragmesh_cli.main", *command, "--corpus", str(missing), "--addr", "127.0.0.1:9"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert result.returncode == 2, result.stderr
    assert f"--corpus {missing}" in result.stderr and "no such folder" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.timeout(600)
async def test_counts_in_the_cli_json_are_numbers(stack: IndexerStack, tmp_path: Path) -> None:
    # protobuf's JSON mapping writes int64 as strings ("chunks": "18") and leaves zeros out; a
    # script reading the CLI's JSON needs numbers, and a count of 0 written as 0.
    source = tmp_path / "mixed"
    shutil.copytree(ROOT / "tests" / "fixtures" / "mixed_corpus", source)
    ci = await cli(stack, "index", "ci", "--corpus", str(source), "--library", "mixed", "--version", "1.0")
    assert ci.returncode == 0, ci.stderr
    build = json.loads(ci.stdout)["build"]
    assert isinstance(build["chunks"], int) and build["chunks"] > 0
    assert build["documents"] > 0 and build["embedded"] == build["chunks"] and build["reused_vectors"] == 0

    again = json.loads((await cli(stack, "index", "build", "--corpus", CORPUS)).stdout)
    assert again["reused_existing"] is True and again["embedded"] == 0 and again["chunks"] == build["chunks"]

    status = json.loads((await cli(stack, "index", "status", "--corpus", CORPUS)).stdout)
    (version,) = status["versions"]
    assert version["chunks"] == build["chunks"] and version["documents"] == build["documents"]
    assert status["in_progress"] == []

    verified = json.loads((await cli(stack, "corpus", "verify", "--corpus", CORPUS)).stdout)
    assert verified["ok"] is True and verified["checked"] > 0 and verified["drift"] == []
    (source / "guide" / "extra.md").write_text("# Extra\n\nA page added after the build.\n", encoding="utf-8")
    second = json.loads((await cli(stack, "index", "ci", "--corpus", CORPUS)).stdout)["build"]["index_version"]
    diff = json.loads((await cli(stack, "index", "diff", "--corpus", CORPUS, "--from", build["index_version"],
                                 "--to", second)).stdout)
    assert isinstance(diff["unchanged"], int) and diff["unchanged"] > 0 and diff["from_chunks"] == build["chunks"]
    assert diff["to_chunks"] == build["chunks"] + 1 and diff["from_documents"] + 1 == diff["to_documents"]
