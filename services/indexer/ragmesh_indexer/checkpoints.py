"""Named points in a build, a validation and a promotion where the process may die.

The application services await ``checkpoint(name)`` at each of them. Normally that does nothing.
Tests pass a function that raises there (an in-process "kill"). The crash-safety test starts the
real indexer process with ``RAGMESH_INDEXER_FAULT_AT=<name>[#<n>]``, which ends the process with
``os._exit(137)`` — no ``finally`` blocks, no flushing, like SIGKILL — the n-th time (default the
first) that checkpoint is reached. ``RAGMESH_INDEXER_FAULT_FILE=<path>`` arms the same from a file
written while the process runs (read at each checkpoint, deleted as the fault fires), so one process
start serves one kill and the restarted process runs clean. Every name is listed in
:data:`CHECKPOINTS`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections import Counter
from typing import Awaitable, Callable

log = logging.getLogger("ragmesh.indexer.faults")

Checkpoint = Callable[[str], Awaitable[None]]

CHECKPOINTS: dict[str, str] = {
    # build (IndexBuilder)
    "parsed-file": "after each file is scanned and parsed",
    "scanned": "all files scanned",
    "chunked": "all documents chunked",
    "manifest-written": "the version's manifest is on disk, no registry row yet",
    "candidate-created": "the candidate's registry row is committed, no collection yet",
    "reuse-resolved": "vectors of unchanged chunks read from the active collection",
    "embed-batch": "after each batch of chunks is embedded",
    "collection-created": "the candidate's collection exists, still empty",
    "upserted-batch": "after each batch of points is written",
    "embedded": "every chunk embedded",
    "built": "the candidate's stats are recorded; the Build reply is not yet sent",
    # validation (Validator)
    "validated-gates": "gates evaluated, result not yet recorded",
    # promotion (Promoter)
    "promote-start": "checks done, registry not yet changed",
    "promote-committed": "the registry says the new version is active; the alias still points at the old one",
    "promote-aliased": "the alias moved; retirement not yet run",
    "rollback-committed": "the registry rolled back; the alias still points at the rolled-back version",
    # removal (CorpusRemover)
    "remove-committed": "the registry says the corpus is removed; its alias and collections remain",
}

FAULT_ENV = "RAGMESH_INDEXER_FAULT_AT"
FAULT_FILE_ENV = "RAGMESH_INDEXER_FAULT_FILE"
KILLED_EXIT_CODE = 137  # what a shell reports for SIGKILL


async def no_checkpoint(name: str) -> None:
    return None


class FaultInjector:
    """Ends the process at the n-th arrival at one checkpoint."""

    def __init__(self, name: str, nth: int = 1) -> None:
        if name not in CHECKPOINTS:
            raise ValueError(f"{FAULT_ENV}: unknown checkpoint {name!r}; known: {', '.join(CHECKPOINTS)}")
        self.name = name
        self.nth = max(1, nth)
        self.seen: Counter[str] = Counter()

    @classmethod
    def parse(cls, spec: str) -> FaultInjector | None:
        spec = spec.strip()
        if not spec:
            return None
        name, _, count = spec.partition("#")
        return cls(name.strip(), int(count) if count.strip() else 1)

    async def __call__(self, name: str) -> None:
        self.seen[name] += 1
        if name == self.name and self.seen[name] == self.nth:
            log.warning("fault injected: exiting", extra={"fields": {"checkpoint": name, "hit": self.nth}})
            sys.stderr.flush()
            os._exit(KILLED_EXIT_CODE)


class ArmedFaultFile:
    """A :class:`FaultInjector` armed by the contents of a file (``<name>[#<n>]``), re-read at each
    checkpoint; counting starts when the contents change."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._spec = ""
        self._injector: FaultInjector | None = None

    async def __call__(self, name: str) -> None:
        try:
            with open(self.path, encoding="utf-8") as handle:
                spec = handle.read().strip()
        except FileNotFoundError:
            spec = ""
        if spec != self._spec:
            self._spec, self._injector = spec, FaultInjector.parse(spec)
        if self._injector is not None and name == self._injector.name \
                and self._injector.seen[name] + 1 == self._injector.nth:
            os.unlink(self.path)  # the restarted process must not die here again
        if self._injector is not None:
            await self._injector(name)


def checkpoint_from_env() -> Checkpoint:
    injector = FaultInjector.parse(os.environ.get(FAULT_ENV, ""))
    if injector is not None:
        return injector
    armed = os.environ.get(FAULT_FILE_ENV, "")
    return ArmedFaultFile(armed) if armed else no_checkpoint
