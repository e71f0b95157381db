"""The corpus a build names (`--corpus` as an id or a folder) and the options that describe it,
shared by `ragmesh index build|ci` and `ragmesh corpus add`."""

from __future__ import annotations

import argparse
from pathlib import Path

from ragmesh_cli.output import EXIT_USAGE, err

URL_BASE_HELP = ("where the corpus is published (https://docs.example.com/v2): citations link there; "
                 "without it (and without $RAGMESH_URL_BASE in the indexer) they open the gateway's "
                 "source view of the cited lines")
LICENSE_HELP = "the documents' license (an SPDX id such as CC-BY-4.0); `ragmesh corpora` lists it"
SOURCE_URL_HELP = "where the documents come from (a repository or site); `ragmesh corpora` lists it"
INCLUDE_HELP = "only files matching this glob, relative to the folder (repeatable; default: all)"
EXCLUDE_HELP = "leave out files matching this glob (repeatable)"


def add_file_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url-base", default="", metavar="URL", help=URL_BASE_HELP)
    p.add_argument("--include", action="append", default=[], metavar="GLOB", help=INCLUDE_HELP)
    p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help=EXCLUDE_HELP)


def corpus_spec(args):
    """The CorpusSpec that `--corpus` (an id or a folder), `--source`, `--library`, `--version` and
    the describing options name; SystemExit(2) for a folder that is not there."""
    from ragmesh.v1 import indexer_pb2

    if not args.source and "/" in args.corpus and not Path(args.corpus).is_dir():
        # Corpus ids are library@version and never hold a "/": this was meant as a folder. In a
        # container that is most often a corpora folder that was not mounted.
        err(f"--corpus {args.corpus}: no such folder here (a corpus id is library@version; "
            "in a container, is the corpora folder mounted there?)")
        raise SystemExit(EXIT_USAGE)
    source = args.source or (args.corpus if Path(args.corpus).is_dir() else "")
    library = args.library or (Path(source).resolve().name if source else args.corpus.split("@")[0])
    version = args.version or (args.corpus.split("@", 1)[1] if "@" in args.corpus else "main")
    corpus = args.corpus if ("@" in args.corpus and not Path(args.corpus).is_dir()) else f"{library}@{version}"
    spec = indexer_pb2.CorpusSpec(
        corpus=corpus, library=library, version=version, root=str(Path(source).resolve()) if source else "",
        visibility=getattr(args, "visibility", "public"),
    )
    for field in ("license", "source_url", "url_base"):
        if getattr(args, field, ""):
            setattr(spec, field, getattr(args, field))
    spec.include.extend(getattr(args, "include", None) or [])
    spec.exclude.extend(getattr(args, "exclude", None) or [])
    return spec
