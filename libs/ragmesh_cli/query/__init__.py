"""`ragmesh search|answer|get|corpora`: the gateway's read API, one JSON document on stdout.

`search` and `answer` print for a person instead (ragmesh_cli.query.human) when stdout is a terminal
and ``--json`` is not given; a pipe, a file or an agent gets the contract JSON, byte for byte.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ragmesh_cli.gateway_client import (
    REQUEST_ID_HEADER,
    GatewayCall,
    add_gateway_options,
    error_line,
    exit_code_for,
    stream_answer,
)
from ragmesh_cli.output import EXIT_NO_EVIDENCE, EXIT_OK, emit, err
from ragmesh_cli.query import human
from ragmesh_common.answer_defaults import ANSWER_SOURCES


def register(sub: argparse._SubParsersAction) -> None:
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
        c.add_argument("--json", action="store_true",
                       help="print the contract JSON even on a terminal (a pipe or a file always gets it)")
        add_gateway_options(c)
        c.set_defaults(func=cmd_search if name == "search" else cmd_answer)

    g = sub.add_parser("get", help="fetch chunks by id, pinned to an index version")
    g.add_argument("chunk_ids", nargs="+", help="chunk ids, as search results and citations give them")
    g.add_argument("--index-version", required=True, help="the index version the ids came from (results name it)")
    g.add_argument("--include-content", action="store_true", help="each chunk's full text, not only its quote")
    add_gateway_options(g)
    g.set_defaults(func=cmd_get)

    c = sub.add_parser("corpora", help="list the corpora you may read")
    add_gateway_options(c)
    c.set_defaults(func=cmd_corpora)


def _filters(args) -> dict:
    out: dict[str, Any] = {}
    for key in ("library", "version", "corpus"):
        if getattr(args, key, ""):
            out[key] = getattr(args, key)
    if getattr(args, "tag", None):
        out["tags"] = args.tag
    return out


def for_a_person(args) -> bool:
    """The human form: stdout is a terminal and --json was not asked for."""
    return not getattr(args, "json", True) and sys.stdout.isatty()


def show(args, document: dict, render, gateway: str) -> None:
    if for_a_person(args):
        sys.stdout.write(render(document, gateway))
        sys.stdout.flush()
    else:
        emit(document)


def _post(args, path: str, body: dict, *, items: str, render=None) -> int:
    """POST, print the reply; exit 4 when it holds no ``items``."""
    call = GatewayCall(args)
    status, data = call.post(path, body)
    if status != 200:
        err(error_line(data))
        return exit_code_for(status)
    if render is None:
        emit(data)
    else:
        show(args, data, render, call.url)
    return EXIT_OK if data.get(items) else EXIT_NO_EVIDENCE


def cmd_search(args) -> int:
    body = {"query": args.query, "top_k": args.top_k, "include_content": args.include_content}
    if _filters(args):
        body["filters"] = _filters(args)
    return _post(args, "/api/rag/v1/search", body, items="results", render=human.search_text)


def cmd_get(args) -> int:
    body = {"chunk_ids": args.chunk_ids, "index_version": args.index_version, "include_content": args.include_content}
    return _post(args, "/api/rag/v1/chunks/batch-get", body, items="chunks")


def cmd_corpora(args) -> int:
    status, data = GatewayCall(args).get("/api/rag/v1/corpora")
    if status != 200:
        err(error_line(data))
        return exit_code_for(status)
    emit(data)
    for corpus in data.get("corpora", []):
        # The JSON says it too; a person reading the terminal should not have to look for it.
        if corpus.get("search") == "keyword_only":
            err(f"{corpus['corpus']} is searched by keywords only: {corpus.get('keyword_only_reason') or ''}")
    return EXIT_OK


def cmd_answer(args) -> int:
    call = GatewayCall(args)
    extra = {"top_k": args.top_k}
    if _filters(args):
        extra["filters"] = _filters(args)
    headers = {**call.headers, REQUEST_ID_HEADER: call.request_id()}
    result = stream_answer(call.url, args.query, headers=headers, timeout=args.timeout, body_extra=extra,
                           address=call.address)
    if result["status"] or result["meta"]:  # the gateway answered (a stream that broke off included)
        call.reached()
    terminal = result["terminal"]
    if terminal["event"] == "error":
        err(error_line(terminal))
        return exit_code_for(result["status"] if result["status"] != 200 else 503)
    # The answer is built from untrusted document text: say so, as the gateway does for sources.
    # index_versions: every version the sources came from, as the stream's meta gives it (an answer
    # over two corpora has no single index_version).
    show(args, {"request_id": result["meta"].get("request_id"), "answer": result["answer"], "trust": "untrusted",
                "answer_status": terminal.get("answer_status"), "sources": result["sources"],
                "security": result["security"], "degraded": terminal.get("degraded", []),
                "index_version": result["meta"].get("index_version"),
                "index_versions": result["meta"].get("index_versions")}, human.answer_text, call.url)
    return EXIT_NO_EVIDENCE if terminal.get("answer_status") == "insufficient_evidence" else EXIT_OK
