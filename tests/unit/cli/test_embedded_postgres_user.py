"""As root, the embedded PostgreSQL's programs start as `nobody` without a fork of this process.

A forked child of a process with gRPC threads runs gRPC's fork handlers before it execs, and there
they can kill it: in CI the permission probe of a restarted server failed for no reason (2026-12-02).
`setpriv` drops the user instead, so subprocess can spawn without fork handlers.
"""

from __future__ import annotations

import pwd

import pytest

from ragmesh_cli.mesh import stores


@pytest.fixture
def as_root(monkeypatch):
    monkeypatch.setattr(stores.os, "geteuid", lambda: 0)


def test_as_root_programs_run_through_setpriv_without_subprocess_user_switch(as_root, monkeypatch) -> None:
    monkeypatch.setattr(stores.shutil, "which", lambda name: "/usr/bin/setpriv" if name == "setpriv" else None)
    nobody = pwd.getpwnam(stores.UNPRIVILEGED_USER)

    argv, kwargs = stores._spawn(["/opt/pg/bin/initdb", "-D", "/x"], stores._run_as())

    assert argv == ["/usr/bin/setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}",
                    "--clear-groups", "--", "/opt/pg/bin/initdb", "-D", "/x"]
    # user/group/extra_groups would make subprocess fork (and run gRPC's fork handlers).
    assert not {"user", "group", "extra_groups", "preexec_fn"} & set(kwargs)
    assert kwargs["env"]["HOME"] == "/"


def test_without_setpriv_the_user_switch_falls_back_to_subprocess(as_root, monkeypatch) -> None:
    monkeypatch.setattr(stores.shutil, "which", lambda name: None)
    nobody = pwd.getpwnam(stores.UNPRIVILEGED_USER)

    argv, kwargs = stores._spawn(["initdb"], stores._run_as())

    assert argv == ["initdb"]
    assert (kwargs["user"], kwargs["group"], kwargs["extra_groups"]) == (nobody.pw_uid, nobody.pw_gid, [])


def test_not_root_runs_programs_as_ourselves(monkeypatch) -> None:
    monkeypatch.setattr(stores.os, "geteuid", lambda: 1000)

    assert stores._spawn(["initdb"], stores._run_as()) == (["initdb"], {})
