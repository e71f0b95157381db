"""What the index and corpus commands say on stderr about a build, its gates and changed files."""

from __future__ import annotations

from ragmesh_cli.output import err


def say_built(built) -> None:
    if built.reused_existing:
        err(f"unchanged: {built.index_version} ({built.state}) already holds this content")
    else:
        err(f"built {built.index_version}: {built.documents} documents, {built.chunks} chunks "
            f"({built.embedded} embedded, {built.reused_vectors} reused)")


def say_gates(report) -> None:
    for gate in report.gates:
        err(f"gate {gate.gate}: {'pass' if gate.passed else 'FAIL'} {gate.detail}")


def say_files(built) -> None:
    counts: dict[str, int] = {}
    for f in built.files:
        counts[f.status] = counts.get(f.status, 0) + 1
        if f.status != "indexed" or f.warnings:
            why = f.reason + (f" ({f.detail})" if f.detail else "")
            err(f"  {f.status:<8} {f.path}" + (f": {why}" if why else "")
                + "".join(f" [warning: {w}]" for w in f.warnings))
    err("files: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))


def change_line(change, *, chunks: bool = True) -> str:
    mark = {"added": "+", "removed": "-", "changed": "~"}.get(change.change, "?")
    notes = []
    if change.change == "changed":
        if change.from_status != change.to_status:
            notes.append(f"{change.from_status} -> {change.to_status}")
        if change.from_sha256 != change.to_sha256:
            notes.append("content changed")
        if chunks:
            notes.append(f"{change.from_chunks} -> {count_chunks(change.to_chunks)}")
    elif chunks:
        notes.append(count_chunks(change.to_chunks if change.change == "added" else change.from_chunks))
    return f"  {mark} {change.path}" + (f" ({', '.join(notes)})" if notes else "")


def count_chunks(n: int) -> str:
    return f"{n} chunk" if n == 1 else f"{n} chunks"
