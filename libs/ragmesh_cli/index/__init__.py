"""`ragmesh index build|ci|validate|promote|rollback|status|diff`: index versions of a corpus.

Every command calls the indexer's gRPC API through ragmesh_cli.indexer_client; stdout carries only
the contract JSON, progress and reports go to stderr.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from ragmesh_cli.index.reports import change_line, say_built, say_gates
from ragmesh_cli.index.spec import LICENSE_HELP, SOURCE_URL_HELP, add_file_options, corpus_spec
from ragmesh_cli.indexer_client import IndexerClient, actor, add_indexer_options, call, corpus_command, pb_json, run
from ragmesh_cli.output import EXIT_FAIL, EXIT_OK, emit, err

# Whoever reaches the indexer's gRPC port is an operator (the port is never public: loopback in the
# embedded mesh, the internal network in Compose), so the CLI builds as one. What the gateway lets
# a token do is decided by its scopes instead (BuildRequest.admin, corpus_roots.py).
OPERATOR = True


def register(sub: argparse._SubParsersAction) -> None:
    idx = sub.add_parser("index", help="build, validate, promote and roll back index versions")
    isub = idx.add_subparsers(dest="index_command", required=True, parser_class=sub._parser_class)
    for name, func in (("build", cmd_index_build), ("ci", cmd_index_ci)):
        b = isub.add_parser(name, help="build a candidate" if name == "build" else "build, validate and promote")
        b.add_argument("--corpus", required=True, help="corpus id (library@version) or a folder")
        b.add_argument("--source", default="", help="folder to index (when the corpus is new)")
        b.add_argument("--library", default="", help="library name (default: the id's, or the folder's name)")
        b.add_argument("--version", default="", help="library version (default: the id's, or main)")
        b.add_argument("--visibility", default="", choices=["public", "internal"],
                       help="default: the registered one; a new corpus is internal")
        b.add_argument("--force", action="store_true", help="build even if a version of this content exists")
        b.add_argument("--reason", default="", help="why, recorded with the version in the registry's audit trail")
        add_indexer_options(b)
        b.add_argument("--license", default="", help=LICENSE_HELP + " (default: the registered one)")
        b.add_argument("--source-url", default="", help=SOURCE_URL_HELP + " (default: the registered one)")
        add_file_options(b)
        # No default visibility: a rebuild keeps the registered one (a new corpus is internal).
        b.set_defaults(func=func, visibility="")
    for name, helptext, func in (
            ("validate", "run the gates on a candidate; exit 1 if one fails", cmd_index_validate),
            ("promote", "make a validated version the one the corpus serves", cmd_index_promote)):
        corpus_command(isub, name, helptext, func, (
            "--index-version", {"required": True, "help": "the version (`index build` or `index status` names it)"}), (
            "--reason", {"default": "", "help": "why, recorded in the audit trail" if name == "promote"
                         else "ignored (validation records no reason); accepted like promote's"}))
    corpus_command(isub, "rollback", "serve the previous version again (swap active and previous)", cmd_index_rollback,
                   ("--reason", {"default": "", "help": "why, recorded in the audit trail"}))
    corpus_command(isub, "status", "the corpus's versions, their states and any build in progress", cmd_index_status)
    corpus_command(isub, "diff", "files and chunks changed between two index versions", cmd_index_diff,
                   ("--from", {"dest": "from_version", "default": "", "help": "default: the active version"}),
                   ("--to", {"dest": "to_version", "default": "", "help": "default: the newest other version"}))


def cmd_index_build(args) -> int:
    from ragmesh.v1 import indexer_pb2

    async def build() -> int:
        async with IndexerClient(args) as indexer:
            spec = corpus_spec(args)
            reply = await indexer.build(indexer_pb2.BuildRequest(
                corpus=spec, force=args.force, actor=actor(), reason=args.reason, admin=OPERATOR),
                label=spec.corpus)
        say_built(reply)
        emit(pb_json(reply))
        return EXIT_OK

    return run(build())


@dataclass
class CiOutcome:
    """What `index ci` did: the build, its validation, and the promotion (None when a gate failed)."""

    built: Any
    report: Any
    promoted: Any | None

    def as_json(self) -> dict:
        """The contract JSON of `ragmesh index ci`."""
        out = {"build": pb_json(self.built), "validation": pb_json(self.report)}
        return out | ({"promote": pb_json(self.promoted)} if self.promoted is not None else {"promoted": False})


async def build_validate_promote(indexer: IndexerClient, args, *, say: bool = True) -> CiOutcome:
    """build -> validate -> promote on one connection; nothing is promoted when a gate fails. With
    ``say`` the build and each gate get their line on stderr (progress is drawn either way)."""
    from ragmesh.v1 import indexer_pb2

    spec = corpus_spec(args)
    built = await indexer.build(indexer_pb2.BuildRequest(
        corpus=spec, force=args.force, actor=actor(), reason=args.reason or "ci", admin=OPERATOR),
        label=spec.corpus)
    if say:
        say_built(built)
    report = await indexer.call("Validate", indexer_pb2.ValidateRequest(
        corpus=spec.corpus, index_version=built.index_version))
    if say:
        say_gates(report)
    if not report.passed:
        return CiOutcome(built, report, None)
    promoted = await indexer.call("Promote", indexer_pb2.PromoteRequest(
        corpus=spec.corpus, index_version=built.index_version, actor=actor(), reason=args.reason or "ci"))
    return CiOutcome(built, report, promoted)


def cmd_index_ci(args) -> int:
    """build -> validate -> promote; a non-zero exit on any failure, nothing promoted then."""
    async def ci() -> int:
        async with IndexerClient(args) as indexer:
            outcome = await build_validate_promote(indexer, args)
        if outcome.promoted is not None:
            err(f"active: {outcome.promoted.active_version}" + ("" if outcome.promoted.changed else " (unchanged)"))
        emit(outcome.as_json())
        return EXIT_OK if outcome.promoted is not None else EXIT_FAIL

    return run(ci())


def cmd_index_validate(args) -> int:
    from ragmesh.v1 import indexer_pb2

    report = call(args, "Validate", indexer_pb2.ValidateRequest(corpus=args.corpus, index_version=args.index_version))
    emit(pb_json(report))
    return EXIT_OK if report.passed else EXIT_FAIL


def cmd_index_promote(args) -> int:
    from ragmesh.v1 import indexer_pb2

    emit(pb_json(call(args, "Promote", indexer_pb2.PromoteRequest(
        corpus=args.corpus, index_version=args.index_version, actor=actor(), reason=args.reason))))
    return EXIT_OK


def cmd_index_rollback(args) -> int:
    from ragmesh.v1 import indexer_pb2

    emit(pb_json(call(args, "Rollback", indexer_pb2.RollbackRequest(corpus=args.corpus, actor=actor(),
                                                                    reason=args.reason))))
    return EXIT_OK


def cmd_index_status(args) -> int:
    from ragmesh.v1 import indexer_pb2

    emit(pb_json(call(args, "Status", indexer_pb2.StatusRequest(corpus=args.corpus))))
    return EXIT_OK


def cmd_index_diff(args) -> int:
    from ragmesh.v1 import indexer_pb2

    reply: Any = call(args, "Diff", indexer_pb2.DiffRequest(
        corpus=args.corpus, from_version=args.from_version, to_version=args.to_version))
    err(f"{reply.from_version} -> {reply.to_version}: {reply.from_documents} -> {reply.to_documents} documents, "
        f"{reply.from_chunks} -> {reply.to_chunks} chunks; {reply.unchanged} files unchanged")
    for change in reply.files:
        err(change_line(change))
    emit(pb_json(reply))
    return EXIT_OK
