"""Where a client command finds the mesh it talks to, and how it was chosen.

In order: the command's flag (``--url``, ``--addr``), its environment variable (``RAGMESH_URL``,
``RAGMESH_INDEXER_ADDR``), the record of the mesh serving from the state folder
(``--state-dir``, else ``$RAGMESH_STATE_DIR``, else ``.ragmesh-state`` here; written by
:meth:`Mesh.start`, ragmesh_cli.mesh.record), and last the documented default port. An error that
reaches no one names the address and which of these chose it (:attr:`Address.chosen_by`).

A state folder named on purpose (flag or variable) must hold a live mesh: one that does not exist
or is not ragmesh's is a bad argument (exit 2), one whose mesh is not running (no record, or a
record whose `ragmesh up` is gone) is unavailable (exit 5). The default folder is only looked at:
without a live mesh in it the default port is tried, as before there were records, unless it holds
the record of a mesh that died (then that is said, exit 5).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from ragmesh_cli.output import EXIT_UNAVAILABLE, EXIT_USAGE

STATE_ENV = "RAGMESH_STATE_DIR"
DEFAULT_STATE = ".ragmesh-state"


class MeshNotFound(Exception):
    """The state folder names no mesh this command can talk to; the message says why and what to do."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


@dataclass(frozen=True)
class Address:
    value: str
    chosen_by: str  # "--url", "$RAGMESH_URL", "the mesh record in ...", "the default port (...)"
    state: Path | None = None  # the state folder whose mesh record named it

    def __str__(self) -> str:
        return f"{self.value} ({self.chosen_by})"


def add_state_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--state-dir", default="",
                   help=f"the state folder of the mesh to talk to (default ${STATE_ENV} or {DEFAULT_STATE}); "
                        "its record says where the mesh listens")


def state_folder(args) -> tuple[Path, str]:
    """(the folder, how it was chosen: "--state-dir", "$RAGMESH_STATE_DIR" or "" for the default)."""
    if getattr(args, "state_dir", ""):
        return Path(args.state_dir).resolve(), "--state-dir"
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV]).resolve(), f"${STATE_ENV}"
    return Path(DEFAULT_STATE).resolve(), ""


def resolve(args, name: str, *, flag: str, flag_value: str, env: str, default: str) -> Address:
    """The address of ``name`` (gateway, mcp, indexer, ...) for this command."""
    if flag_value:
        return Address(flag_value, flag)
    if os.environ.get(env):
        return Address(os.environ[env], f"${env}")
    found = live_record(args)
    if isinstance(found, Address):
        return Address(default, found.chosen_by)
    return Address(found[0].address(name), f"the mesh record in {found[1]}", state=state_folder(args)[0])


def live_record(args):
    """(record, its path) of the mesh serving from the state folder; for the default folder without
    one, an Address whose ``chosen_by`` says the default port is used and why. MeshNotFound otherwise."""
    from ragmesh_cli.mesh import record as mesh_record
    from ragmesh_cli.mesh.lifecycle import StateFolder

    state, named_by = state_folder(args)
    where = f"{state} ({named_by})" if named_by else str(state)
    if named_by and not state.is_dir():
        raise MeshNotFound(f"no state folder at {where}: start a mesh there with `ragmesh up --state-dir {state}`, "
                           "or name the folder of the running one", EXIT_USAGE)
    if state.is_dir() and any(state.iterdir()) and not StateFolder(state).is_ragmesh():
        raise MeshNotFound(f"{where} is not a ragmesh state folder (no RAGMESH_STATE file, and it holds other "
                           "files): name the folder `ragmesh up` serves from", EXIT_USAGE)
    try:
        found = mesh_record.read(state)
    except mesh_record.UnreadableRecord as exc:
        raise MeshNotFound(f"the mesh record of {where} is unreadable: {exc}", EXIT_USAGE) from None
    path = mesh_record.path_in(state)
    if found is None:
        if named_by:
            raise MeshNotFound(f"no mesh is running from {where} (no {mesh_record.RECORD}): start one with "
                               f"`ragmesh up --state-dir {state}`", EXIT_UNAVAILABLE)
        return Address("", f"the default port: no mesh runs from {state}")
    if not found.owner_alive():
        raise MeshNotFound(
            f"the mesh recorded in {path} (gateway {found.gateway_url}) is gone: its `ragmesh up` "
            f"(pid {found.owner.get('pid')}) is not running. Start it again with "
            f"`ragmesh up{'' if not named_by else f' --state-dir {state}'}`"
            + ("" if found.port_base is None else f" --port-base {found.port_base}")
            + ", or name another mesh with --url / --addr", EXIT_UNAVAILABLE)
    return found, path
