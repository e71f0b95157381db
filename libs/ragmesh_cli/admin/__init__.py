"""`ragmesh token|access`: run the gateway's admin entry point.

Tokens and grants live in the gateway's PostgreSQL schema, and only the gateway package knows it.
The CLI must not import a service (tests/unit/test_layering.py), so these commands run
``python -m ragmesh_gateway.admin`` as a child process with the same arguments and environment
(``RAGMESH_POSTGRES_URL``, ``RAGMESH_GATEWAY_DB_SCHEMA``). The admin entry point owns the argument
grammar, the JSON on stdout and the exit codes; the CLI passes all three through unchanged.

Without ``RAGMESH_POSTGRES_URL`` the embedded PostgreSQL that `ragmesh up` runs is found from the
state folder (``--state-dir``, taken out of the arguments before they are passed on, else
``$RAGMESH_STATE_DIR``, else ``.ragmesh-state``), so a newcomer's `ragmesh token create` works in
the folder where `make run` serves.
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
    admin_args, state_dir = _take_state_dir(args.admin_args)
    if state_dir is None:
        print("ragmesh: --state-dir needs a folder", file=sys.stderr)
        return EXIT_USAGE
    env = dict(os.environ)
    if not _wants_help(admin_args) and not env.get(POSTGRES_URL) and not env.get(f"{POSTGRES_URL}_FILE"):
        url = embedded_postgres_url(state_dir)
        if not url:
            return EXIT_USAGE
        env[POSTGRES_URL] = url
    command = [sys.executable, "-m", ADMIN_MODULE, args.admin_command, *admin_args]
    # stdin is closed: the admin never prompts, and a TTY must not make it try.
    return subprocess.run(command, stdin=subprocess.DEVNULL, env=env).returncode


def mint_token(postgres_url: str, client: str, scopes: list[str]) -> dict:
    """A new token through the admin entry point (`ragmesh up --auth tokens`): its JSON, the
    plaintext included; RuntimeError saying why when none was made."""
    import json

    if importlib.util.find_spec(ADMIN_MODULE) is None:
        raise RuntimeError(f"minting a token needs the gateway package ({ADMIN_MODULE}) installed")
    done = subprocess.run([sys.executable, "-m", ADMIN_MODULE, "token", "create", "--client", client,
                           "--scope", ",".join(scopes)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env={**os.environ, POSTGRES_URL: postgres_url}, timeout=120)
    if done.returncode != 0:
        raise RuntimeError(f"no token was minted: {done.stderr.strip() or f'exit {done.returncode}'}")
    return json.loads(done.stdout)


def _take_state_dir(admin_args: list[str]) -> tuple[list[str], str | None]:
    """The arguments without ``--state-dir DIR`` (or ``--state-dir=DIR``), and DIR ("" when not
    given; None when the flag has no value)."""
    rest, state = [], ""
    items = iter(admin_args)
    for item in items:
        if item == "--state-dir":
            state = next(items, None)
            if state is None:
                return rest, None
        elif item.startswith("--state-dir="):
            state = item.split("=", 1)[1]
        else:
            rest.append(item)
    return rest, state


def _wants_help(admin_args: list[str]) -> bool:
    return not admin_args or any(a in ("-h", "--help") for a in admin_args)


def embedded_postgres_url(state_dir: str = "") -> str:
    """The URL of the embedded PostgreSQL serving from the state folder, or "" after saying why."""
    from pathlib import Path

    from ragmesh_cli.mesh import record, stores

    state = Path(state_dir or os.environ.get("RAGMESH_STATE_DIR") or ".ragmesh-state").resolve()
    running = stores.running_postgres(state)
    if running is not None:
        return stores.postgres_url_for(running[1])
    try:
        serving = record.read(state)
    except record.UnreadableRecord:
        serving = None
    if serving is not None and serving.postgres == "external" and serving.owner_alive():
        why = (f"the mesh serving from {state} uses the PostgreSQL its {POSTGRES_URL} names (not an embedded "
               "one); set that variable here too")
    elif (state / "postgres" / "data").is_dir():
        why = f"the embedded PostgreSQL of {state} is not running; start the mesh with `ragmesh up --state-dir {state}`"
    else:
        why = (f"no embedded PostgreSQL under {state} (start one with `ragmesh up --state-dir {state}`, "
               "or set RAGMESH_STATE_DIR to the state folder of the running mesh)")
    print(f"ragmesh: {POSTGRES_URL} is not set and {why}; tokens and grants live in PostgreSQL",
          file=sys.stderr)
    return ""
