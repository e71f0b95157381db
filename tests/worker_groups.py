"""Which tests share a pytest-xdist worker under ``make test`` (two workers), and in what order.

A module runs on one worker (its module-scoped fixtures start once, its tests keep their order), and
the modules using one of :data:`SHARED_ON_ONE_WORKER` run on the same one: under xdist a session
fixture is per worker, so a mesh or a model runtime still starts once per run, as in a serial run.

xdist's own ``--dist loadgroup`` renames each test's node id to carry its group, which pytest 9 no
longer allows (the id is derived, the rename is silently lost), so the workers write the groups to
a file and the controller's scheduler (:class:`SharedFixtureScheduling`) reads them from there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

# Session-scoped fixtures that start something expensive (a model runtime, a mesh, private stores), by
# the folder that defines them, the heaviest group of tests first. A module using one only through
# request.getfixturevalue says so itself with ``pytest.mark.xdist_group("<fixture>")``
# (tests/e2e/test_doc_examples.py).
SHARED_ON_ONE_WORKER = (
    ("tests/integration/indexer", "runtime_url"),
    ("tests/e2e", "mesh"),
    ("tests/e2e", "observed_mesh"),
    ("tests/integration/runtime", "runtime_models"),
    ("tests", "private_stores"),
)
# Then every other module, by folder: the meshes of their own first, the many short unit modules last,
# so both workers finish together.
FOLDER_ORDER = ("tests/e2e", "tests/integration", "tests/contract", "tests/unit")
GROUPS_FILE = "ragmesh_worker_groups"  # the workerinput key naming the file


def _module_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _marked_group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return None if mark is None else str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def module_groups(items: list[pytest.Item]) -> dict[str, str]:
    """Module -> group: its own ``xdist_group`` mark, else the first fixture of
    :data:`SHARED_ON_ONE_WORKER` the module uses, else the module itself."""
    uses: dict[str, set[str]] = {}
    for item in items:
        module = _module_of(item)
        names = uses.setdefault(module, set())
        if (marked := _marked_group(item)) is not None:
            names.add(marked)
        names.update(name for folder, name in SHARED_ON_ONE_WORKER
                     if module.startswith(f"{folder}/") and name in item.fixturenames)
    shared = [name for _, name in SHARED_ON_ONE_WORKER]
    return {module: next((name for name in shared if name in names), next(iter(sorted(names)), module))
            for module, names in uses.items()}


def _rank(module: str, group: str) -> int:
    shared = [name for _, name in SHARED_ON_ONE_WORKER]
    if group in shared:
        return shared.index(group)
    folder = next((i for i, f in enumerate(FOLDER_ORDER) if module.startswith(f"{f}/")), len(FOLDER_ORDER))
    return len(shared) + folder


def write_groups(items: list[pytest.Item], path: Path) -> None:
    """In a worker: order ``items`` (the scheduler hands out groups in the order their first test
    appears; the sort is stable) and write node id -> group where the controller reads it."""
    groups = module_groups(items)
    items.sort(key=lambda item: _rank(_module_of(item), groups[_module_of(item)]))
    partial = path.with_name(f"{path.name}.{os.getpid()}")
    partial.write_text(json.dumps({item.nodeid: groups[_module_of(item)] for item in items}), encoding="utf-8")
    os.replace(partial, path)  # every worker writes the same; a reader never sees half a file


def scheduler(config: pytest.Config, log, path: Path):
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        """xdist's load-by-scope scheduler, a scope being a group of :func:`module_groups`; it runs
        once every worker has collected (and so written the file)."""

        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                self._groups = json.loads(path.read_text(encoding="utf-8"))
            return self._groups.get(nodeid, nodeid)

    return SharedFixtureScheduling(config, log)
