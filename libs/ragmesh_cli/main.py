"""`ragmesh` — the command line for people, agents and CI.

stdout carries only contract JSON (or the answer text with `up --ask`); diagnostics go to stderr.
Exit codes: 0 ok, 2 bad arguments (a state folder that is not ragmesh's included), 3 auth failure,
4 no evidence, 5 unavailable (for `up`: a port or the state folder in use), 1 other failure.
Never prompts.
"""

from __future__ import annotations

import argparse
import sys

from ragmesh_cli import admin_commands, commands, corpus_commands, mesh_commands
from ragmesh_cli import trace_commands
from ragmesh_common.answer_defaults import ANSWER_SOURCES

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_AUTH, EXIT_NO_EVIDENCE, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4, 5


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep the message on stderr
        self.print_usage(sys.stderr)
        print(f"ragmesh: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ragmesh", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    up = sub.add_parser("up", help="start the embedded mesh (runtime + five services) on 127.0.0.1")
    up.add_argument("--corpus", action="append", default=[], metavar="PATH", help="index this folder on start")
    up.add_argument("--library", default="", help="library name for --corpus (default: folder name)")
    up.add_argument("--ask", default="", help="ask this question once ready and print the answer")
    up.add_argument("--state-dir", default="", help="state folder (default $RAGMESH_STATE_DIR or .ragmesh-state)")
    up.add_argument("--port-base", type=int, default=None, help="consecutive ports from here (default: documented)")
    up.add_argument("--exit-after-ask", action="store_true", help="stop the mesh after answering --ask")
    up.set_defaults(func=mesh_commands.cmd_up)

    down = sub.add_parser("down", help="stop everything `ragmesh up` started under a state folder, "
                                       "the embedded PostgreSQL and Redis included")
    down.add_argument("--state-dir", default="", help="state folder (default $RAGMESH_STATE_DIR or .ragmesh-state)")
    down.set_defaults(func=mesh_commands.cmd_down)

    for name, helptext in (("search", "search the knowledge base"), ("answer", "ask a grounded question")):
        c = sub.add_parser(name, help=helptext)
        c.add_argument("query", help="what to search for" if name == "search" else "the question")
        top_k = 8 if name == "search" else ANSWER_SOURCES  # answer: what the widget, MCP and OpenAI route use
        c.add_argument("--top-k", type=int, default=top_k,
                       help=f"passages to return (default {top_k})" if name == "search"
                       else f"passages to answer from (default {top_k})")
        c.add_argument("--library", default="", help="only this library (corpus ids are library@version)")
        c.add_argument("--version", default="", help="only this version of the library")
        c.add_argument("--corpus", default="", help="only this corpus (library@version)")
        c.add_argument("--tag", action="append", default=[], help="only chunks with this tag (repeatable)")
        c.add_argument("--include-content", action="store_true",
                       help="each passage's full text, not only its quote" if name == "search"
                       else "ignored by answer; accepted so search and answer take the same options")
        _http_options(c)
        c.set_defaults(func=commands.cmd_search if name == "search" else commands.cmd_answer)

    g = sub.add_parser("get", help="fetch chunks by id, pinned to an index version")
    g.add_argument("chunk_ids", nargs="+", help="chunk ids, as search results and citations give them")
    g.add_argument("--index-version", required=True, help="the index version the ids came from (results name it)")
    g.add_argument("--include-content", action="store_true", help="each chunk's full text, not only its quote")
    _http_options(g)
    g.set_defaults(func=commands.cmd_get)

    c = sub.add_parser("corpora", help="list the corpora you may read")
    _http_options(c)
    c.set_defaults(func=commands.cmd_corpora)

    idx = sub.add_parser("index", help="build, validate, promote and roll back index versions")
    isub = idx.add_subparsers(dest="index_command", required=True, parser_class=_Parser)
    for name in ("build", "ci"):
        b = isub.add_parser(name, help="build a candidate" if name == "build" else "build, validate and promote")
        b.add_argument("--corpus", required=True, help="corpus id (library@version) or a folder")
        b.add_argument("--source", default="", help="folder to index (when the corpus is new)")
        b.add_argument("--library", default="", help="library name (default: the id's, or the folder's name)")
        b.add_argument("--version", default="", help="library version (default: the id's, or main)")
        b.add_argument("--visibility", default="", choices=["public", "internal"],
                       help="default: the registered one; a new corpus is internal")
        b.add_argument("--force", action="store_true", help="build even if a version of this content exists")
        b.add_argument("--reason", default="", help="why, recorded with the version in the registry's audit trail")
        _grpc_options(b)  # corpus_commands.register adds the rest and the handler
    for name, helptext in (("validate", "run the gates on a candidate; exit 1 if one fails"),
                           ("promote", "make a validated version the one the corpus serves")):
        v = isub.add_parser(name, help=helptext)
        v.add_argument("--corpus", required=True, help="corpus id (library@version)")
        v.add_argument("--index-version", required=True, help="the version (`index build` or `index status` names it)")
        v.add_argument("--reason", default="", help="why, recorded in the audit trail" if name == "promote"
                       else "ignored (validation records no reason); accepted like promote's")
        _grpc_options(v)
        v.set_defaults(func=getattr(commands, f"cmd_index_{name}"))
    r = isub.add_parser("rollback", help="serve the previous version again (swap active and previous)")
    r.add_argument("--corpus", required=True, help="corpus id (library@version)")
    r.add_argument("--reason", default="", help="why, recorded in the audit trail")
    _grpc_options(r)
    r.set_defaults(func=commands.cmd_index_rollback)
    s = isub.add_parser("status", help="the corpus's versions, their states and any build in progress")
    s.add_argument("--corpus", required=True, help="corpus id (library@version)")
    _grpc_options(s)
    s.set_defaults(func=commands.cmd_index_status)
    corpus_commands.register(sub, isub)  # corpus add|verify, index diff, progress for index build|ci
    admin_commands.register(sub, _http_options)  # token, access, mcp
    trace_commands.register(sub)  # trace
    return p


def _http_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default="", help="gateway URL (default $RAGMESH_URL or http://127.0.0.1:8080)")
    p.add_argument("--token", default="", help="bearer token (default $RAGMESH_TOKEN)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the gateway (default 60)")


def _grpc_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--addr", default="", help="indexer gRPC address (default $RAGMESH_INDEXER_ADDR)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for the indexer (default 1800)")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
