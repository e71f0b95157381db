"""make test's two pytest-xdist workers (tests/worker_groups.py): a module stays on one worker, the
modules sharing an expensive session fixture share one, and the heavy groups are handed out first."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from worker_groups import module_groups, write_groups


def item(nodeid: str, *fixtures: str, group: str | None = None) -> SimpleNamespace:
    mark = pytest.mark.xdist_group(group).mark if group else None
    return SimpleNamespace(nodeid=nodeid, fixturenames=["request", *fixtures],
                           get_closest_marker=lambda name: mark if name == "xdist_group" else None)


ITEMS = [
    item("tests/unit/test_a.py::test_one"),
    item("tests/unit/test_a.py::test_two"),
    item("tests/e2e/test_drills.py::test_drill[redis]"),
    item("tests/e2e/test_answers.py::test_refusal", "mesh"),
    item("tests/e2e/test_answers.py::test_errors[empty]"),  # no mesh itself: its module has one
    item("tests/e2e/test_doc_examples.py::test_page[README.md]", group="mesh"),  # getfixturevalue("mesh")
    item("tests/e2e/test_otlp.py::test_tree", "observed_mesh"),
    item("tests/integration/gateway/test_api.py::test_route", "mesh"),  # another folder's `mesh`
    item("tests/integration/test_stores.py::test_restart", "private_stores"),
    item("tests/integration/indexer/test_crash.py::test_kill", "runtime_url"),
]


def test_modules_sharing_a_mesh_share_a_group_and_every_other_module_is_its_own() -> None:
    assert module_groups(ITEMS) == {
        "tests/unit/test_a.py": "tests/unit/test_a.py",
        "tests/e2e/test_drills.py": "tests/e2e/test_drills.py",
        "tests/e2e/test_answers.py": "mesh",
        "tests/e2e/test_doc_examples.py": "mesh",
        "tests/e2e/test_otlp.py": "observed_mesh",
        "tests/integration/gateway/test_api.py": "tests/integration/gateway/test_api.py",
        "tests/integration/test_stores.py": "private_stores",
        "tests/integration/indexer/test_crash.py": "runtime_url",
    }


def test_the_file_holds_every_test_heaviest_groups_first(tmp_path: Path) -> None:
    items = list(ITEMS)
    write_groups(items, tmp_path / "groups.json")
    written = json.loads((tmp_path / "groups.json").read_text(encoding="utf-8"))
    assert list(written) == [i.nodeid for i in items] and len(written) == len(ITEMS)
    assert [written[i.nodeid] for i in items][:5] == ["runtime_url", "mesh", "mesh", "mesh", "observed_mesh"]
    # Then the e2e modules of their own, integration, and the unit modules last (order kept inside).
    assert [i.nodeid for i in items][5:] == [
        "tests/integration/test_stores.py::test_restart",
        "tests/e2e/test_drills.py::test_drill[redis]",
        "tests/integration/gateway/test_api.py::test_route",
        "tests/unit/test_a.py::test_one",
        "tests/unit/test_a.py::test_two",
    ]
