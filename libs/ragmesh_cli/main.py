"""`ragmesh` — the command line for people, agents and CI.

stdout carries only contract JSON (or the answer text with `up --ask`); diagnostics go to stderr.
Exit codes: 0 ok, 2 bad arguments (a state folder that is not ragmesh's included), 3 auth failure,
4 no evidence, 5 unavailable (for `up`: a port or the state folder in use), 1 other failure.
Never prompts.

Each command group is a package of ragmesh_cli that registers its own parser: mesh.commands
(`up`, `down`), query (`search`, `answer`, `get`, `corpora`), index, corpus, admin (`token`,
`access`), mcp and trace.
"""

from __future__ import annotations

import argparse
import sys

from ragmesh_cli import admin, corpus, index, mcp, query, trace
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
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
