"""`ragmesh corpus add|verify|remove` and the indexer commands that report progress or compare versions:
`ragmesh index build|ci|diff`.

All of them talk to the indexer over gRPC; none imports the indexer (the CLI is a lib). While a
Build runs, the command polls the Status RPC and draws its progress on stderr: a redrawn bar when
stderr is a terminal, else one line per stage and every PROGRESS_LINE_EVERY_S seconds.
stdout carries only the contract JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from ragmesh_cli.commands import (
    EXIT_FAIL,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    _actor,
    _pb_json,
    corpus_spec,
    emit,
    err,
)

POLL_INTERVAL_S = 0.5
TRAFFIC_EVERY_S = 10.0
PROGRESS_LINE_EVERY_S = 10.0
_USAGE_CODES = {"INVALID_ARGUMENT", "NOT_FOUND"}
_UNAVAILABLE_CODES = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "RUNTIME_ERROR"}


class IndexerFailed(Exception):
    def __init__(self, exit_code: int) -> None:
        self.exit_code = exit_code


# ---------------------------------------------------------------- progress

class ProgressView:
    """Draws build progress on ``stream``; never touches stdout."""

    def __init__(self, stream: TextIO, *, label: str, tty: bool | None = None) -> None:
        self.stream = stream
        self.label = label
        self.tty = stream.isatty() if tty is None else tty
        self.started = time.monotonic()
        self._last: tuple[str, int, int] | None = None
        self._last_line_at = 0.0
        self._drawn = False
        # (stage, when it was first seen, its count then): the stage's own rate, not the build's.
        self._stage_start: tuple[str, float, int] = ("", 0.0, 0)

    def show(self, stage: str, done: int, total: int, *, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        if stage != self._stage_start[0]:
            self._stage_start = (stage, now, done)
        rate = self.rate(done, now)
        if self.tty:
            self.stream.write("\r\033[K" + self.render(stage, done, total, now - self.started, rate))
            self._drawn = True
        elif (self._last is None or stage != self._last[0]
              or now - self._last_line_at >= PROGRESS_LINE_EVERY_S and (stage, done, total) != self._last):
            self.stream.write(f"ragmesh: {self.render(stage, done, total, now - self.started, rate)}\n")
            self._last_line_at = now
        self._last = (stage, done, total)
        self.stream.flush()

    def rate(self, done: int, now: float) -> float:
        """Items per second in the current stage, once it has run a second; 0 before that."""
        _, since, done_then = self._stage_start
        return (done - done_then) / (now - since) if now - since >= 1.0 and done > done_then else 0.0

    def render(self, stage: str, done: int, total: int, elapsed: float, rate: float = 0.0) -> str:
        # Embedding is the long stage of a build (chunks per second decide its length): its rate and
        # the time left are shown once known.
        speed = ""
        if rate > 0 and stage == "embed":
            speed = f" {rate:.1f} chunks/s"
            if total > done:
                speed += f" ETA {(total - done) / rate:.0f}s"
        if total > 0:
            share = min(1.0, done / total)
            bar = "#" * int(share * 30)
            return f"{self.label} {stage:<6} [{bar:<30}] {done}/{total} {share:4.0%} {elapsed:5.0f}s{speed}"
        return f"{self.label} {stage:<6} {done} {elapsed:5.0f}s{speed}"

    def close(self) -> None:
        if self.tty and self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()


class IndexerClient:
    """One channel to the indexer for the whole command; every call has a deadline."""

    def __init__(self, args) -> None:
        self.addr = args.addr or os.environ.get("RAGMESH_INDEXER_ADDR", "127.0.0.1:50054")
        self.timeout = args.timeout

    async def __aenter__(self) -> IndexerClient:
        from ragmesh.v1 import indexer_pb2_grpc
        from ragmesh_common.rpc.client import open_channel

        self._channel = open_channel(self.addr)
        self.stub = indexer_pb2_grpc.IndexerStub(self._channel)
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._channel.close()

    async def call(self, method: str, request, *, timeout: float | None = None):
        from ragmesh_common.errors import RagmeshError
        from ragmesh_common.rpc.client import unary

        job = asyncio.create_task(unary(getattr(self.stub, method), request, timeout=timeout or self.timeout,
                                        peer="indexer"))
        try:
            # A call that runs for minutes (validating a large corpus) must keep traffic on the
            # connection: the channel's keepalive pings alone, with no data in between, make the
            # server answer GOAWAY "too_many_pings" after ~90 s and the call fails UNAVAILABLE.
            while not job.done():
                await asyncio.wait({job}, timeout=TRAFFIC_EVERY_S)
                if not job.done():
                    await self._health()
            return job.result()
        except RagmeshError as exc:
            err(f"{exc.code.value}: {exc.message}")
            code = exc.code.value
            raise IndexerFailed(EXIT_UNAVAILABLE if code in _UNAVAILABLE_CODES else
                                EXIT_USAGE if code in _USAGE_CODES else EXIT_FAIL) from None
        finally:
            if not job.done():
                job.cancel()

    async def _health(self) -> None:
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        try:
            await health_pb2_grpc.HealthStub(self._channel).Check(health_pb2.HealthCheckRequest(service=""),
                                                                  timeout=5)
        except Exception:  # noqa: BLE001 - only traffic; the call itself reports a dead indexer
            pass

    async def build(self, request, *, label: str, stream: TextIO | None = None):
        """Build, drawing the Status RPC's progress of this build until the reply arrives."""
        from ragmesh.v1 import indexer_pb2

        stream = stream or sys.stderr
        status_request = indexer_pb2.StatusRequest(corpus=request.corpus.corpus)
        earlier = {p.index_version for p in await self._progress(status_request) if p.index_version}
        view = ProgressView(stream, label=label)
        job = asyncio.create_task(self.call("Build", request))
        try:
            while not job.done():
                await asyncio.wait({job}, timeout=POLL_INTERVAL_S)
                if job.done():
                    break
                ours = [p for p in await self._progress(status_request) if p.index_version not in earlier]
                if ours:
                    view.show(ours[0].stage, ours[0].done, ours[0].total)
            return job.result()
        finally:
            if not job.done():
                job.cancel()
            view.close()

    async def _progress(self, request) -> list:
        from ragmesh_common.errors import RagmeshError
        from ragmesh_common.rpc.client import unary

        try:  # progress is a courtesy: a failed poll must not fail the build
            reply = await unary(self.stub.Status, request, timeout=5, peer="indexer")
        except RagmeshError:
            return []
        return list(reply.in_progress)


def _run(coro) -> int:
    try:
        return asyncio.run(coro)
    except IndexerFailed as failed:
        return failed.exit_code


# ---------------------------------------------------------------- index build | ci | diff

# Whoever reaches the indexer's gRPC port is an operator (the port is never public: loopback in the
# embedded mesh, the internal network in Compose), so the CLI builds as one. What the gateway lets
# a token do is decided by its scopes instead (BuildRequest.admin, corpus_roots.py).
OPERATOR = True

def _spec(args):
    spec = corpus_spec(args)
    for field in ("license", "source_url", "url_base"):
        if getattr(args, field, ""):
            setattr(spec, field, getattr(args, field))
    spec.include.extend(getattr(args, "include", None) or [])
    spec.exclude.extend(getattr(args, "exclude", None) or [])
    return spec


def cmd_index_build(args) -> int:
    from ragmesh.v1 import indexer_pb2

    async def run() -> int:
        async with IndexerClient(args) as indexer:
            spec = _spec(args)
            reply = await indexer.build(indexer_pb2.BuildRequest(
                corpus=spec, force=args.force, actor=_actor(), reason=args.reason, admin=OPERATOR),
                label=spec.corpus)
        _say_built(reply)
        emit(_pb_json(reply))
        return EXIT_OK

    return _run(run())


def cmd_index_ci(args) -> int:
    """build -> validate -> promote; a non-zero exit on any failure, nothing promoted then."""
    from ragmesh.v1 import indexer_pb2

    async def run() -> int:
        async with IndexerClient(args) as indexer:
            spec = _spec(args)
            built = await indexer.build(indexer_pb2.BuildRequest(
                corpus=spec, force=args.force, actor=_actor(), reason=args.reason or "ci", admin=OPERATOR),
                label=spec.corpus)
            _say_built(built)
            report = await indexer.call("Validate", indexer_pb2.ValidateRequest(
                corpus=spec.corpus, index_version=built.index_version))
            _say_gates(report)
            if not report.passed:
                emit({"build": _pb_json(built), "validation": _pb_json(report), "promoted": False})
                return EXIT_FAIL
            promoted = await indexer.call("Promote", indexer_pb2.PromoteRequest(
                corpus=spec.corpus, index_version=built.index_version, actor=_actor(), reason=args.reason or "ci"))
        err(f"active: {promoted.active_version}" + ("" if promoted.changed else " (unchanged)"))
        emit({"build": _pb_json(built), "validation": _pb_json(report), "promote": _pb_json(promoted)})
        return EXIT_OK

    return _run(run())


def cmd_index_diff(args) -> int:
    from ragmesh.v1 import indexer_pb2

    async def run() -> int:
        async with IndexerClient(args) as indexer:
            reply = await indexer.call("Diff", indexer_pb2.DiffRequest(
                corpus=args.corpus, from_version=args.from_version, to_version=args.to_version))
        err(f"{reply.from_version} -> {reply.to_version}: {reply.from_documents} -> {reply.to_documents} documents, "
            f"{reply.from_chunks} -> {reply.to_chunks} chunks; {reply.unchanged} files unchanged")
        for change in reply.files:
            err(_change_line(change))
        emit(_pb_json(reply))
        return EXIT_OK

    return _run(run())


# ---------------------------------------------------------------- corpus add | verify

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

    async def run() -> int:
        async with IndexerClient(args) as indexer:
            request = indexer_pb2.BuildRequest(corpus=spec, actor=_actor(), reason=args.reason or "corpus add",
                                               dry_run=args.dry_run, admin=OPERATOR)
            built = await indexer.build(request, label=spec.corpus)
            _say_files(built)
            if args.dry_run:
                err(f"dry run: {built.documents} documents, {built.chunks} chunks would be indexed; nothing written")
                emit({"corpus": spec.corpus, "dry_run": True, "build": _pb_json(built)})
                return EXIT_OK
            _say_built(built)
            report = await indexer.call("Validate", indexer_pb2.ValidateRequest(
                corpus=spec.corpus, index_version=built.index_version))
            _say_gates(report)
        out: dict[str, Any] = {"corpus": spec.corpus, "dry_run": False, "build": _pb_json(built),
                               "validation": _pb_json(report)}
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

    return _run(run())


def cmd_corpus_verify(args) -> int:
    from ragmesh.v1 import indexer_pb2

    async def run() -> int:
        async with IndexerClient(args) as indexer:
            reply = await indexer.call("Verify", indexer_pb2.VerifyRequest(corpus=args.corpus))
        for change in reply.drift:
            err(_change_line(change, chunks=False))
        err(f"{reply.corpus} {reply.index_version}: {reply.checked} files checked, "
            + ("all match the manifest" if reply.ok else f"{len(reply.drift)} differ from the manifest"))
        emit(_pb_json(reply))
        return EXIT_OK if reply.ok else EXIT_FAIL

    return _run(run())


def cmd_corpus_remove(args) -> int:
    """Retire every version of a corpus and delete what served it; --dry-run only says what."""
    from ragmesh.v1 import indexer_pb2

    async def run() -> int:
        async with IndexerClient(args) as indexer:
            reply = await indexer.call("Remove", indexer_pb2.RemoveRequest(
                corpus=args.corpus, dry_run=args.dry_run, actor=_actor(), reason=args.reason or "corpus remove"))
        versions = [{"index_version": v.index_version, "state": v.state, "collection": v.collection,
                     "chunks": v.chunks, "collection_exists": v.collection_exists} for v in reply.versions]
        for v in versions:
            err(f"  {v['index_version']} ({v['state']}, {_chunks(v['chunks'])}): collection {v['collection']}"
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

    return _run(run())


# ---------------------------------------------------------------- stderr reports

def _say_built(built) -> None:
    if built.reused_existing:
        err(f"unchanged: {built.index_version} ({built.state}) already holds this content")
    else:
        err(f"built {built.index_version}: {built.documents} documents, {built.chunks} chunks "
            f"({built.embedded} embedded, {built.reused_vectors} reused)")


def _say_gates(report) -> None:
    for gate in report.gates:
        err(f"gate {gate.gate}: {'pass' if gate.passed else 'FAIL'} {gate.detail}")


def _say_files(built) -> None:
    counts: dict[str, int] = {}
    for f in built.files:
        counts[f.status] = counts.get(f.status, 0) + 1
        if f.status != "indexed" or f.warnings:
            why = f.reason + (f" ({f.detail})" if f.detail else "")
            err(f"  {f.status:<8} {f.path}" + (f": {why}" if why else "")
                + "".join(f" [warning: {w}]" for w in f.warnings))
    err("files: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))


def _change_line(change, *, chunks: bool = True) -> str:
    mark = {"added": "+", "removed": "-", "changed": "~"}.get(change.change, "?")
    notes = []
    if change.change == "changed":
        if change.from_status != change.to_status:
            notes.append(f"{change.from_status} -> {change.to_status}")
        if change.from_sha256 != change.to_sha256:
            notes.append("content changed")
        if chunks:
            notes.append(f"{change.from_chunks} -> {_chunks(change.to_chunks)}")
    elif chunks:
        notes.append(_chunks(change.to_chunks if change.change == "added" else change.from_chunks))
    return f"  {mark} {change.path}" + (f" ({', '.join(notes)})" if notes else "")


def _chunks(n: int) -> str:
    return f"{n} chunk" if n == 1 else f"{n} chunks"


# ---------------------------------------------------------------- argument parsing

URL_BASE_HELP = ("where the corpus is published (https://docs.example.com/v2): citations link there; "
                 "without it (and without $RAGMESH_URL_BASE in the indexer) they open the gateway's "
                 "source view of the cited lines")
LICENSE_HELP = "the documents' license (an SPDX id such as CC-BY-4.0); `ragmesh corpora` lists it"
SOURCE_URL_HELP = "where the documents come from (a repository or site); `ragmesh corpora` lists it"
INCLUDE_HELP = "only files matching this glob, relative to the folder (repeatable; default: all)"
EXCLUDE_HELP = "leave out files matching this glob (repeatable)"

def register(sub, index_sub) -> None:
    """Wire these commands into the `ragmesh` parser (main.py) and its `index` subcommands."""
    for name, func in (("build", cmd_index_build), ("ci", cmd_index_ci)):
        p = index_sub.choices[name]
        p.add_argument("--license", default="", help=LICENSE_HELP + " (default: the registered one)")
        p.add_argument("--source-url", default="", help=SOURCE_URL_HELP + " (default: the registered one)")
        p.add_argument("--url-base", default="", metavar="URL", help=URL_BASE_HELP)
        p.add_argument("--include", action="append", default=[], metavar="GLOB", help=INCLUDE_HELP)
        p.add_argument("--exclude", action="append", default=[], metavar="GLOB", help=EXCLUDE_HELP)
        # No default visibility: a rebuild keeps the registered one (a new corpus is internal).
        p.set_defaults(func=func, visibility="")
    d = index_sub.add_parser("diff", help="files and chunks changed between two index versions")
    d.add_argument("--corpus", required=True, help="corpus id (library@version)")
    d.add_argument("--from", dest="from_version", default="", help="default: the active version")
    d.add_argument("--to", dest="to_version", default="", help="default: the newest other version")
    _grpc_options(d)
    d.set_defaults(func=cmd_index_diff)

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
    add.add_argument("--url-base", default="", metavar="URL", help=URL_BASE_HELP)
    add.add_argument("--include", action="append", default=[], metavar="GLOB", help=INCLUDE_HELP)
    add.add_argument("--exclude", action="append", default=[], metavar="GLOB", help=EXCLUDE_HELP)
    add.add_argument("--reason", default="", help="why, recorded in the audit trail (default: corpus add)")
    add.add_argument("--dry-run", action="store_true", help="scan and chunk in the indexer; write nothing")
    _grpc_options(add)
    add.set_defaults(func=cmd_corpus_add)
    verify = csub.add_parser("verify", help="re-check files on disk against the active version's manifest")
    verify.add_argument("--corpus", required=True, help="corpus id (library@version)")
    _grpc_options(verify)
    verify.set_defaults(func=cmd_corpus_verify)
    remove = csub.add_parser("remove", help="retire every index version of a corpus and delete its alias and "
                                            "collections, so nothing of it is served any more")
    remove.add_argument("corpus", metavar="CORPUS", help="corpus id (library@version)")
    remove.add_argument("--dry-run", action="store_true", help="say what would be removed; change nothing")
    remove.add_argument("--reason", default="", help="recorded in the registry's audit trail")
    _grpc_options(remove)
    remove.set_defaults(func=cmd_corpus_remove)


def _grpc_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--addr", default="", help="indexer gRPC address (default $RAGMESH_INDEXER_ADDR)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds to wait for the indexer (default 1800)")
