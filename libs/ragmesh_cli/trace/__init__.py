"""`ragmesh trace REQUEST_ID | --last`: one request's span tree, without Grafana.

Spans come from the embedded mesh's span file (``<state>/traces/spans.jsonl``, written by every
process `ragmesh up` starts), or from Tempo's HTTP API when ``--tempo-url`` or
``$RAGMESH_TEMPO_URL`` names one (in Compose, ``http://tempo:3200`` on the backend network).
An explicit ``--state-dir`` always reads that folder's file.

stdout: the tree as indented lines, or with ``--json`` one JSON object (numbers as numbers).
Exit codes: 0 shown; 2 no such request id, or no such state folder; 1 nothing recorded yet;
5 Tempo unreachable.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ragmesh_cli.output import EXIT_FAIL, EXIT_OK, EXIT_USAGE, err
from ragmesh_cli.trace.sources import SpanFileSource, TempoSource, TraceLookupError
from ragmesh_cli.trace.span_tree import SpanTree
from ragmesh_common.span_file import default_span_file, span_file_exists
from ragmesh_common.telemetry import well_formed_request_id


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser(
        "trace", help="print one request's span tree (service, operation, duration, status)",
        description="Print the span tree of one request: by the X-Request-ID it got back, or the last one.",
    )
    t.add_argument("request_id", nargs="?", default="", metavar="REQUEST_ID",
                   help="the request's X-Request-ID (its response header, `request_id` in JSON answers)")
    t.add_argument("--last", action="store_true", help="the most recent request instead")
    t.add_argument("--json", action="store_true", help="the tree as one JSON object (every span)")
    t.add_argument("--all", action="store_true", dest="every_span",
                   help="also show the ASGI middleware's span for each message sent or received")
    t.add_argument("--state-dir", default="",
                   help="read this mesh's span file (default $RAGMESH_TRACE_FILE, else "
                        "$RAGMESH_STATE_DIR or .ragmesh-state)")
    t.add_argument("--tempo-url", default="", help="read from Tempo's HTTP API (default $RAGMESH_TEMPO_URL)")
    t.add_argument("--timeout", type=float, default=10.0, help="seconds per Tempo request")
    t.set_defaults(func=cmd_trace)


def cmd_trace(args) -> int:
    if bool(args.request_id) == bool(args.last):
        return _fail("give a REQUEST_ID or --last (not both)", EXIT_USAGE)
    if args.request_id and not well_formed_request_id(args.request_id):
        return _fail(f"{args.request_id!r} is not a request id (the gateway's are letters, digits and ._:-, "
                     "at most 128 characters)", EXIT_USAGE)
    try:
        source = _source(args)
        found = source.last() if args.last else source.by_request_id(args.request_id)
    except TraceLookupError as exc:
        return _fail(exc.message, exc.exit_code)
    if found.note:
        err(found.note)
    tree = SpanTree(found.trace_id, found.request_id, found.spans)
    if args.json:
        import json

        sys.stdout.write(json.dumps(tree.as_json(), ensure_ascii=False) + "\n")
    else:
        sys.stdout.write("\n".join(tree.lines(every_span=args.every_span)) + "\n")
    sys.stdout.flush()
    return EXIT_OK


def _source(args) -> SpanFileSource | TempoSource:
    tempo = args.tempo_url or ("" if args.state_dir else os.environ.get("RAGMESH_TEMPO_URL", ""))
    if tempo:
        return TempoSource(tempo, timeout=args.timeout)
    state: Path | None = None
    named = os.environ.get("RAGMESH_TRACE_FILE", "")
    if args.state_dir:
        state = Path(args.state_dir)
        path = default_span_file(state)
    elif named:
        path = Path(named)
    else:
        state = Path(os.environ.get("RAGMESH_STATE_DIR") or ".ragmesh-state")
        path = default_span_file(state)
    if state is not None and not state.is_dir():
        raise TraceLookupError(f"no state folder at {state} (start the mesh with `ragmesh up`, or name its "
                               "folder with --state-dir)", EXIT_USAGE)
    if not span_file_exists(path):
        raise TraceLookupError(f"no spans recorded at {path} yet (every process of `ragmesh up` writes "
                               "them there unless RAGMESH_TRACE_FILE names another file)", EXIT_FAIL)
    return SpanFileSource(path)


def _fail(message: str, code: int) -> int:
    err(message)
    return code
