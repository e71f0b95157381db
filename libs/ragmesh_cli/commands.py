"""Implementations of the `ragmesh` subcommands (argument parsing lives in main.py)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import httpx

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_AUTH, EXIT_NO_EVIDENCE, EXIT_UNAVAILABLE = 0, 1, 2, 3, 4, 5


def err(message: str) -> None:
    print(f"ragmesh: {message}", file=sys.stderr, flush=True)


def emit(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


# ---------------------------------------------------------------- gateway (HTTP) commands

class GatewayCall:
    def __init__(self, args) -> None:
        self.url = (args.url or os.environ.get("RAGMESH_URL") or "http://127.0.0.1:8080").rstrip("/")
        token = args.token or os.environ.get("RAGMESH_TOKEN", "")
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = args.timeout

    def post(self, path: str, body: dict) -> tuple[int, Any]:
        return self._request("POST", path, body)

    def get(self, path: str) -> tuple[int, Any]:
        return self._request("GET", path, None)

    def _request(self, method: str, path: str, body: dict | None) -> tuple[int, Any]:
        try:
            resp = httpx.request(method, self.url + path, json=body, headers=self.headers, timeout=self.timeout)
        except httpx.HTTPError as exc:
            return 0, {"code": "UNAVAILABLE", "message": f"gateway unreachable at {self.url} ({type(exc).__name__})"}
        try:
            return resp.status_code, resp.json()
        except ValueError:
            return resp.status_code, {"code": "INTERNAL", "message": "gateway returned a non-JSON body"}


def exit_code_for(status: int) -> int:
    # 429 is "try again later", like a downstream that is down: not the caller's arguments.
    if status == 0 or status in (429, 502, 503, 504):
        return EXIT_UNAVAILABLE
    if status in (401, 403):
        return EXIT_AUTH
    if status in (400, 404, 405, 409, 410, 413, 415, 422):
        return EXIT_USAGE
    return EXIT_OK if 200 <= status < 300 else EXIT_FAIL


def _filters(args) -> dict:
    out: dict[str, Any] = {}
    for key in ("library", "version", "corpus"):
        if getattr(args, key, ""):
            out[key] = getattr(args, key)
    if getattr(args, "tag", None):
        out["tags"] = args.tag
    return out


def cmd_search(args) -> int:
    body = {"query": args.query, "top_k": args.top_k, "include_content": args.include_content}
    if _filters(args):
        body["filters"] = _filters(args)
    status, data = GatewayCall(args).post("/api/rag/v1/search", body)
    if status != 200:
        err(f"{data.get('code', 'ERROR')}: {data.get('message', '')}")
        return exit_code_for(status)
    emit(data)
    return EXIT_OK if data.get("results") else EXIT_NO_EVIDENCE


def cmd_get(args) -> int:
    body = {"chunk_ids": args.chunk_ids, "index_version": args.index_version, "include_content": args.include_content}
    status, data = GatewayCall(args).post("/api/rag/v1/chunks/batch-get", body)
    if status != 200:
        err(f"{data.get('code', 'ERROR')}: {data.get('message', '')}")
        return exit_code_for(status)
    emit(data)
    return EXIT_OK if data.get("chunks") else EXIT_NO_EVIDENCE


def cmd_corpora(args) -> int:
    status, data = GatewayCall(args).get("/api/rag/v1/corpora")
    if status != 200:
        err(f"{data.get('code', 'ERROR')}: {data.get('message', '')}")
        return exit_code_for(status)
    emit(data)
    for corpus in data.get("corpora", []):
        # The JSON says it too; a person reading the terminal should not have to look for it.
        if corpus.get("search") == "keyword_only":
            err(f"{corpus['corpus']} is searched by keywords only: {corpus.get('keyword_only_reason') or ''}")
    return EXIT_OK


def stream_answer(url: str, question: str, *, headers: dict, timeout: float, body_extra: dict | None = None) -> dict:
    """Consume the SSE chat stream; returns the collected answer, sources and terminal event."""
    from httpx_sse import connect_sse

    result: dict[str, Any] = {"answer": "", "sources": [], "security": None, "meta": {}, "terminal": None,
                              "status": 200}
    body = {"question": question, **(body_extra or {})}
    try:
        with httpx.Client(timeout=httpx.Timeout(timeout, read=timeout)) as client:
            with connect_sse(client, "POST", url.rstrip("/") + "/api/rag/v1/chat/stream", json=body,
                             headers=headers) as source:
                result["status"] = source.response.status_code
                if source.response.status_code != 200:
                    source.response.read()
                    try:
                        result["terminal"] = {"event": "error", **source.response.json()}
                    except ValueError:
                        result["terminal"] = {"event": "error", "code": "INTERNAL"}
                    return result
                for event in source.iter_sse():
                    data = json.loads(event.data) if event.data else {}
                    if event.event == "meta":
                        result["meta"] = data
                    elif event.event == "token":
                        result["answer"] += data.get("text", "")
                    elif event.event == "sources":
                        result["sources"] = data.get("sources", [])
                        result["security"] = data.get("security")
                    elif event.event in ("done", "error"):
                        result["terminal"] = {"event": event.event, **data}
                        break
    except httpx.HTTPError as exc:
        result["status"] = 0
        result["terminal"] = {"event": "error", "code": "UNAVAILABLE", "message": type(exc).__name__}
    return result


def cmd_answer(args) -> int:
    call = GatewayCall(args)
    extra = {"top_k": args.top_k}
    if _filters(args):
        extra["filters"] = _filters(args)
    result = stream_answer(call.url, args.query, headers=call.headers, timeout=args.timeout, body_extra=extra)
    terminal = result["terminal"] or {"event": "error", "code": "UNAVAILABLE", "message": "stream ended early"}
    if terminal["event"] == "error":
        err(f"{terminal.get('code', 'ERROR')}: {terminal.get('message', '')}")
        return exit_code_for(result["status"] if result["status"] != 200 else 503)
    # The answer is built from untrusted document text: say so, as the gateway does for sources.
    emit({"request_id": result["meta"].get("request_id"), "answer": result["answer"], "trust": "untrusted",
          "answer_status": terminal.get("answer_status"), "sources": result["sources"],
          "security": result["security"], "degraded": terminal.get("degraded", []),
          "index_version": result["meta"].get("index_version")})
    return EXIT_NO_EVIDENCE if terminal.get("answer_status") == "insufficient_evidence" else EXIT_OK


# ---------------------------------------------------------------- index (gRPC) commands

def _indexer_call(args, method: str, request) -> Any:
    from ragmesh.v1 import indexer_pb2_grpc
    from ragmesh_common.errors import RagmeshError
    from ragmesh_common.rpc.client import open_channel, unary

    addr = args.addr or os.environ.get("RAGMESH_INDEXER_ADDR", "127.0.0.1:50054")

    async def run():
        async with open_channel(addr) as channel:
            stub = indexer_pb2_grpc.IndexerStub(channel)
            return await unary(getattr(stub, method), request, timeout=args.timeout, peer="indexer")

    try:
        return asyncio.run(run())
    except RagmeshError as exc:
        err(f"{exc.code.value}: {exc.message}")
        code = exc.code.value
        raise SystemExit(EXIT_UNAVAILABLE if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED") else
                         EXIT_USAGE if exc.http_status < 500 else EXIT_FAIL) from None


def corpus_spec(args):
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
    return indexer_pb2.CorpusSpec(
        corpus=corpus, library=library, version=version, root=str(Path(source).resolve()) if source else "",
        visibility=getattr(args, "visibility", "public"),
    )


def _pb_json(message) -> dict:
    """A reply as the CLI's contract JSON: counts as numbers and every field present, a zero or an
    empty list included (protobuf's JSON mapping would write int64 as strings and leave them out)."""
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True,
                         unquote_int64_if_possible=True)


def cmd_index_validate(args) -> int:
    from ragmesh.v1 import indexer_pb2

    report = _indexer_call(args, "Validate", indexer_pb2.ValidateRequest(corpus=args.corpus,
                                                                        index_version=args.index_version))
    emit(_pb_json(report))
    return EXIT_OK if report.passed else EXIT_FAIL


def cmd_index_promote(args) -> int:
    from ragmesh.v1 import indexer_pb2

    reply = _indexer_call(args, "Promote", indexer_pb2.PromoteRequest(
        corpus=args.corpus, index_version=args.index_version, actor=_actor(), reason=args.reason))
    emit(_pb_json(reply))
    return EXIT_OK


def cmd_index_rollback(args) -> int:
    from ragmesh.v1 import indexer_pb2

    reply = _indexer_call(args, "Rollback", indexer_pb2.RollbackRequest(corpus=args.corpus, actor=_actor(),
                                                                        reason=args.reason))
    emit(_pb_json(reply))
    return EXIT_OK


def cmd_index_status(args) -> int:
    from ragmesh.v1 import indexer_pb2

    emit(_pb_json(_indexer_call(args, "Status", indexer_pb2.StatusRequest(corpus=args.corpus))))
    return EXIT_OK


def _actor() -> str:
    return os.environ.get("RAGMESH_ACTOR") or os.environ.get("USER") or "cli"
