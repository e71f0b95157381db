"""`ragmesh` — the command line for people, agents and CI.

stdout carries only contract JSON (or the answer text with `up --ask`, and the human form of
`search` and `answer` when stdout is a terminal and --json is not given); diagnostics go to stderr.
Exit codes: 0 ok, 2 bad arguments (a state folder that is missing when named, or not ragmesh's,
included), 3 auth failure, 4 no evidence, 5 unavailable (for `up`: a port or the state folder in
use; for the client commands: no mesh running from the state folder, or its record is of a mesh
that is gone), 1 other failure. Every error names the request id when the request reached a
service. Never prompts.

The client commands find the mesh they talk to in order: --url / --addr, $RAGMESH_URL /
$RAGMESH_INDEXER_ADDR, the record of the mesh serving from --state-dir ($RAGMESH_STATE_DIR,
.ragmesh-state here), the default port (ragmesh_cli.addresses); `ragmesh url` prints the result.

Each command group is a package of ragmesh_cli that registers its own parser: mesh.commands
(`up`, `down`), query (`search`, `answer`, `get`, `corpora`), index, corpus, admin (`token`,
`access`), mcp and trace.
"""

from __future__ import annotations

import argparse
import sys

from ragmesh_cli import admin, corpus, index, mcp, query, trace
from ragmesh_cli.addresses import MeshNotFound
from ragmesh_cli.indexer_client import IndexerFailed
from ragmesh_cli.mesh import commands as mesh_commands
from ragmesh_cli.output import EXIT_USAGE

# The order of `ragmesh --help`.
GROUPS = (mesh_commands, query, index, corpus, admin, mcp, trace)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep the message on stderr
        self.print_usage(sys.stderr)
        print(f"ragmesh: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ragmesh", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for group in GROUPS:
        group.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except IndexerFailed as failed:  # said on stderr already
        return failed.exit_code
    except MeshNotFound as missing:
        print(f"ragmesh: {missing.message}", file=sys.stderr)
        return missing.exit_code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
