"""`ragmesh corpus add|verify|remove`: bring a folder in as a corpus, check its files against the
active version, or take it out of service. Calls go through ragmesh_cli.indexer_client."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ragmesh_cli.index import OPERATOR
from ragmesh_cli.index.reports import change_line, count_chunks, say_built, say_files, say_gates
from ragmesh_cli.index.spec import LICENSE_HELP, SOURCE_URL_HELP, add_file_options
from ragmesh_cli.indexer_client import IndexerClient, actor, add_indexer_options, call, corpus_command, pb_json, run
from ragmesh_cli.output import EXIT_FAIL, EXIT_OK, EXIT_USAGE, emit, err


def register(sub: argparse._SubParsersAction) -> None:
    corpus = sub.add_parser("corpus", help="add a corpus, verify its files against the active version, "
                                           "or remove it")
    csub = corpus.add_subparsers(dest="corpus_command", required=True, parser_class=sub._parser_class)
    add = csub.add_parser("add", help="scan, check and build a candidate; prints the promote command")
    add.add_argument("--library", required=True, help="library name; the corpus id is library@version")
    add.add_argument("--version", required=True, help="library version (1.0, main, ...)")
    add.add_argument("--source", required=True, metavar="DIR", help="folder holding the documents")
    add.add_argument("--license", required=True, help=LICENSE_HELP)
    add.add_argument("--source-url", required=True, help=SOURCE_URL_HELP)
    add.add_argument("--visibility", required=True, choices=["public", "internal"],
                     help="public: every caller may read it; internal: only clients granted access "
                     "(`ragmesh access grant`)")
    add_file_options(add)
    add.add_argument("--reason", default="", help="why, recorded in the audit trail (default: corpus add)")
    add.add_argument("--dry-run", action="store_true", help="scan and chunk in the indexer; write nothing")
    add_indexer_options(add)
    add.set_defaults(func=cmd_corpus_add)
    corpus_command(csub, "verify", "re-check files on disk against the active version's manifest", cmd_corpus_verify)
    remove = csub.add_parser("remove", help="retire every index version of a corpus and delete its alias and "
                                            "collections, so nothing of it is served any more")
    remove.add_argument("corpus", metavar="CORPUS", help="corpus id (library@version)")
    remove.add_argument("--dry-run", action="store_true", help="say what would be removed; change nothing")
    remove.add_argument("--reason", default="", help="recorded in the registry's audit trail")
    add_indexer_options(remove)
    remove.set_defaults(func=cmd_corpus_remove)


def cmd_corpus_add(args) -> int:
    """Scan, check, build a candidate and validate it; print the promote command, never promote."""
    from ragmesh.v1 import indexer_pb2

    source = Path(args.source)
    if not source.is_dir():
        err(f"--source {args.source} is not a folder")
        return EXIT_USAGE
    spec = indexer_pb2.CorpusSpec(
        corpus=f"{args.library}@{args.version}", library=args.library, version=args.version,
        root=str(source.resolve()), include=args.include or [], exclude=args.exclude or [],
        visibility=args.visibility, license=args.license, source_url=args.source_url, url_base=args.url_base,
    )

    async def add() -> int:
        async with IndexerClient(args) as indexer:
            request = indexer_pb2.BuildRequest(corpus=spec, actor=actor(), reason=args.reason or "corpus add",
                                               dry_run=args.dry_run, admin=OPERATOR)
            built = await indexer.build(request, label=spec.corpus)
            say_files(built)
            if args.dry_run:
                err(f"dry run: {built.documents} documents, {built.chunks} chunks would be indexed; nothing written")
                emit({"corpus": spec.corpus, "dry_run": True, "build": pb_json(built)})
                return EXIT_OK
            say_built(built)
            report = await indexer.call("Validate", indexer_pb2.ValidateRequest(
                corpus=spec.corpus, index_version=built.index_version))
            say_gates(report)
        out: dict[str, Any] = {"corpus": spec.corpus, "dry_run": False, "build": pb_json(built),
                               "validation": pb_json(report)}
        if not report.passed:
            emit(out)
            return EXIT_FAIL
        if built.state == "active":
            err(f"{built.index_version} already serves {spec.corpus}; nothing to promote")
        else:
            out["promote_command"] = (f"ragmesh index promote --corpus {spec.corpus} "
                                      f"--index-version {built.index_version}")
            err(f"next: {out['promote_command']}")
        emit(out)
        return EXIT_OK

    return run(add())


def cmd_corpus_verify(args) -> int:
    from ragmesh.v1 import indexer_pb2

    reply = call(args, "Verify", indexer_pb2.VerifyRequest(corpus=args.corpus))
    for change in reply.drift:
        err(change_line(change, chunks=False))
    err(f"{reply.corpus} {reply.index_version}: {reply.checked} files checked, "
        + ("all match the manifest" if reply.ok else f"{len(reply.drift)} differ from the manifest"))
    emit(pb_json(reply))
    return EXIT_OK if reply.ok else EXIT_FAIL


def cmd_corpus_remove(args) -> int:
    """Retire every version of a corpus and delete what served it; --dry-run only says what."""
    from ragmesh.v1 import indexer_pb2

    reply = call(args, "Remove", indexer_pb2.RemoveRequest(
        corpus=args.corpus, dry_run=args.dry_run, actor=actor(), reason=args.reason or "corpus remove"))
    versions = [{"index_version": v.index_version, "state": v.state, "collection": v.collection,
                 "chunks": v.chunks, "collection_exists": v.collection_exists} for v in reply.versions]
    for v in versions:
        err(f"  {v['index_version']} ({v['state']}, {count_chunks(v['chunks'])}): collection {v['collection']}"
            + ("" if v["collection_exists"] else " (already gone)"))
    count = f"{len(versions)} version{'s' if len(versions) != 1 else ''}"
    alias = [f"alias {reply.alias}"] if reply.alias_existed else []
    if reply.dry_run:
        err(f"dry run: would remove {reply.corpus}: {', '.join([count, *alias])}; nothing changed")
    else:
        deleted = len(reply.collections_deleted)
        gone = [f"{count} retired", *(f"{a} deleted" for a in alias),
                f"{deleted} collection{'s' if deleted != 1 else ''} deleted"]
        err(f"removed {reply.corpus}: {', '.join(gone)}; its manifests are kept")
    emit({"corpus": reply.corpus, "dry_run": reply.dry_run, "alias": reply.alias,
          "alias_existed": reply.alias_existed, "versions": versions,
          "collections_deleted": list(reply.collections_deleted)})
    return EXIT_OK
