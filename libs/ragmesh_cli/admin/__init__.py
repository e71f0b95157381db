"""`ragmesh token|access`: run the gateway's admin entry point.

Tokens and grants live in the gateway's PostgreSQL schema, and only the gateway package knows it.
The CLI must not import a service (tests/unit/test_layering.py), so these commands run
``python -m ragmesh_gateway.admin`` as a child process with the same arguments and environment
(``RAGMESH_POSTGRES_URL``, ``RAGMESH_GATEWAY_DB_SCHEMA``). The admin entry point owns the argument
grammar, the JSON on stdout and the exit codes; the CLI passes all three through unchanged.

Without ``RAGMESH_POSTGRES_URL`` the embedded PostgreSQL that `ragmesh up` runs is found from the
state folder (``$RAGMESH_STATE_DIR``, else ``.ragmesh-state``), so a newcomer's `ragmesh token create`
works in the folder where `make run` serves.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys

from ragmesh_cli.output import EXIT_FAIL, EXIT_USAGE

ADMIN_MODULE = "ragmesh_gateway.admin"
POSTGRES_URL = "RAGMESH_POSTGRES_URL"


def register(sub: argparse._SubParsersAction) -> None:
    for name, helptext in (
        ("token", "create, revoke and list API tokens (`ragmesh token --help`)"),
        ("access", "grant, revoke and list corpus read access (`ragmesh access --help`)"),
    ):
        # No options of its own: everything after the command word, --help included, goes to the
        # admin entry point. A prefix no argument starts with keeps argparse from reading any of it.
        p = sub.add_parser(name, help=helptext, add_help=False, prefix_chars="\x00")
        p.add_argument("admin_args", nargs=argparse.REMAINDER, help=f"`ragmesh {name} --help` lists them")
        p.set_defaults(func=cmd_admin, admin_command=name)


def cmd_admin(args) -> int:
    if importlib.util.find_spec(ADMIN_MODULE) is None:
        print(f"ragmesh: `{args.admin_command}` needs the gateway package ({ADMIN_MODULE}) installed",
              file=sys.stderr)
        return EXIT_FAIL
    env = dict(os.environ)
    if not _wants_help(args.admin_args) and not env.get(POSTGRES_URL) and not env.get(f"{POSTGRES_URL}_FILE"):
        url = embedded_postgres_url()
        if not url:
            return EXIT_USAGE
        env[POSTGRES_URL] = url
    command = [sys.executable, "-m", ADMIN_MODULE, args.admin_command, *args.admin_args]
    # stdin is closed: the admin never prompts, and a TTY must not make it try.
    return subprocess.run(command, stdin=subprocess.DEVNULL, env=env).returncode


def _wants_help(admin_args: list[str]) -> bool:
    return not admin_args or any(a in ("-h", "--help") for a in admin_args)


def embedded_postgres_url() -> str:
    """The URL of the embedded PostgreSQL serving from the state folder, or "" after saying why."""
    from pathlib import Path

    from ragmesh_cli.mesh import stores

    state = Path(os.environ.get("RAGMESH_STATE_DIR") or ".ragmesh-state").resolve()
    running = stores.running_postgres(state)
    if running is not None:
        return stores.postgres_url_for(running[1])
    if (state / "postgres" / "data").is_dir():
        why = f"the embedded PostgreSQL of {state} is not running; start the mesh with `ragmesh up --state-dir {state}`"
    else:
        why = (f"no embedded PostgreSQL under {state} (start one with `ragmesh up --state-dir {state}`, "
               "or set RAGMESH_STATE_DIR to the state folder of the running mesh)")
    print(f"ragmesh: {POSTGRES_URL} is not set and {why}; tokens and grants live in PostgreSQL",
          file=sys.stderr)
    return ""
