"""Which folders `ragmesh up` adopts as its state folder (libs/ragmesh_cli/mesh/lifecycle.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragmesh_cli.mesh.lifecycle import MARKER, NotRagmeshState, StateFolder


def test_a_folder_holding_only_the_caches_make_test_leaves_is_adopted(tmp_path: Path) -> None:
    """Tried as a new user would: `make test`, then `make run` in the same checkout, refused with
    ".ragmesh-state is not a ragmesh state folder": the suite had left the runtime's vector caches
    and bench/scale.py's base vectors in the default folder, and nothing else."""
    state = tmp_path / ".ragmesh-state"
    (state / "runtime").mkdir(parents=True)
    for name in ("embed-cache.npz", "embed-cache.bm25-terms.npz", "embed-cache.wordpiece.npz"):
        (state / "runtime" / name).write_bytes(b"npz")
    (state / "bench-scale").mkdir()
    (state / "bench-scale" / "base-48-026d18279f31e902.npz").write_bytes(b"npz")

    StateFolder(state).claim()

    assert (state / MARKER).is_file()
    assert (state / "runtime" / "embed-cache.npz").read_bytes() == b"npz"  # kept, not cleared


@pytest.mark.parametrize("stranger", [
    "notes.txt",  # a file beside the caches
    "runtime/holiday.jpg",  # a file of someone else's in a folder named like ours
])
def test_a_folder_with_anything_else_beside_the_caches_is_still_refused(tmp_path: Path, stranger: str) -> None:
    state = tmp_path / "state"
    (state / "bench-scale").mkdir(parents=True)
    (state / "bench-scale" / "base-1-ab.npz").write_bytes(b"npz")
    (state / stranger).parent.mkdir(parents=True, exist_ok=True)
    (state / stranger).write_bytes(b"mine")

    with pytest.raises(NotRagmeshState, match="is not a ragmesh state folder"):
        StateFolder(state).claim()
    assert not (state / MARKER).exists()
