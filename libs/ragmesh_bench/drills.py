"""Fault drills: under load, kill each part of the embedded mesh and watch it heal.

    .venv/bin/python bench/drills.py [--corpus docs] [--clients 4] [--only rerank,redis] [--json out.json]

Starts ``ragmesh up`` (its supervisor restarts whatever dies) with its own PostgreSQL and Redis,
puts a few clients on it (searches, chats, session follow-ups, without pause), then one drill
after another SIGKILLs rerank, generation, the model runtime, retrieval, Redis and PostgreSQL (the
stores are restarted by the drill after ``--store-down-s``), and has the indexer die in the middle of
a build (``os._exit(137)`` at a build checkpoint, as under SIGKILL; ``interrupted_build``).
For each it prints one row:

- requests / answered (2xx) / errors (anything else) / 5xx, counted from the kill to the end of
  the drill, and the degraded flags the answers carried;
- outage s: from the kill until the service answers its health check again (the supervisor's
  restart and the process's start) or the store is restarted;
- recovery s: from then until the first answer that is clean again (2xx, none of the drill's
  flags), i.e. how long a returning service goes unused;
- data lost: sessions, the active index and the registry compared before and after;
- chat during: what one chat got half a second into the outage, and how the gateway's server
  span of it ended (from the mesh's span file).

tests/e2e/test_drills.py runs the same drills on a small corpus and asserts on the rows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ragmesh_bench.drill_mesh import API, ROOT, DrillMesh, Load, Sample, as_json, kill, sync_ask
from ragmesh_bench.harness import RunningMesh
from ragmesh_common.span_file import default_span_file, read_span_records
from ragmesh_bench.smoke import parse_args

WARM_S = 1.5  # load before the kill: the baseline the drill departs from
SETTLE_S = 2.0  # load after recovery: the answers that show it stays recovered
TIMEOUT_S = 180.0


@dataclass(frozen=True)
class Drill:
    name: str
    kind: str  # "service" (the supervisor restarts it) or "store" (the drill restarts it)
    flags: frozenset[str] = frozenset()  # degraded flags its outage implies
    ops: frozenset[str] = frozenset({"search", "chat", "follow-up"})  # answers that depend on it


DRILLS = [
    Drill("rerank", "service", frozenset({"rerank"})),
    Drill("generation", "service", frozenset({"generation"}), frozenset({"chat", "follow-up"})),
    Drill("runtime", "service", frozenset({"embedding", "rerank", "generation"})),
    Drill("retrieval", "service"),  # the end of the line: 503 UNAVAILABLE until it is back
    Drill("indexer", "service", ops=frozenset()),  # killed mid-build; search never depends on it
    Drill("redis", "store", frozenset({"session_memory", "ratelimit"})),
    Drill("postgres", "store", ops=frozenset()),  # registry (and tokens): the probe measures it
]


@dataclass
class Row:
    drill: str
    requests: int
    answered: int
    degraded: dict[str, int]
    errors: int
    server_errors: dict[str, int]
    outage_s: float
    recovery_s: float | None
    data_lost: list[str] = field(default_factory=list)
    probe: str = ""  # what the drill's own probe saw (indexer / postgres)
    ready_during: dict = field(default_factory=dict)  # /health/ready half a second into the outage
    chat_during: dict = field(default_factory=dict)  # a chat right after that, and its root span
    unplanned: list[dict] = field(default_factory=list)  # answers flagged beyond the drill's flags, and why

    def table_row(self) -> str:
        flags = ", ".join(f"{k} {v}" for k, v in sorted(self.degraded.items())) or "none"
        fives = sum(self.server_errors.values())
        fives_text = f"{fives} ({', '.join(f'{k} {v}' for k, v in sorted(self.server_errors.items()))})" \
            if fives else "0"
        recovery = "—" if self.recovery_s is None else f"{self.recovery_s:.2f}"
        return (f"| {self.drill} | {self.requests} | {self.answered} | {flags} | {self.errors} | {fives_text} | "
                f"{self.outage_s:.1f} | {recovery} | {', '.join(self.data_lost) or 'none'} |")


TABLE_HEAD = ("| drill (SIGKILL) | requests | answered | degraded flags | errors | 5xx | outage s | "
              "recovery s | data lost |\n|---|---|---|---|---|---|---|---|---|")


# --- what must survive every drill -----------------------------------------------------------------

def snapshot(mesh: DrillMesh, canary: str, corpus: str) -> dict:
    """The active index, the top hit of a fixed query, the registry's versions, the canary session."""
    corpora = sync_ask(mesh.gateway, "GET", f"{API}/corpora").json()
    top = sync_ask(mesh.gateway, "POST", f"{API}/search", {"query": "scheduler queue", "top_k": 1}).json()
    status = sync_ask(mesh.gateway, "GET", f"{API}/internal/index/status?corpus={corpus}").json()
    follow = sync_ask(mesh.gateway, "POST", f"{API}/chat", {"question": "and its default?", "session_id": canary})
    return {
        "active": sorted((c["corpus"], c.get("active_index_version")) for c in corpora.get("corpora", [])),
        "top": [r["chunk_id"] for r in top.get("results", [])],
        "versions": [v["index_version"] for v in status.get("versions", []) if v["state"] in ("active", "previous")],
        "session": follow.status_code,
    }


def lost(before: dict, after: dict) -> list[str]:
    out = []
    if after["active"] != before["active"]:
        out.append("active index changed")
    if after["top"] != before["top"]:
        out.append("search results changed")
    if after["versions"] != before["versions"]:
        out.append("registry versions changed")
    if after["session"] != 200:
        out.append(f"session lost ({after['session']})")
    return out


def wait_for(predicate, timeout_s: float = TIMEOUT_S, step_s: float = 0.05):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step_s)
    raise TimeoutError(f"not within {timeout_s:.0f}s")


def readiness(mesh: DrillMesh) -> dict:
    """What /health/ready says half a second into an outage (its status code and body)."""
    time.sleep(0.5)
    try:
        response = sync_ask(mesh.gateway, "GET", "/health/ready")
        return {"http": response.status_code, **response.json()}
    except Exception as exc:  # noqa: BLE001 - the gateway itself may be what is down
        return {"http": 0, "error": type(exc).__name__}


def chat_during(mesh: DrillMesh) -> dict:
    """What one chat gets during the outage (right after :func:`readiness`): status, answer and
    sources basis, flags, and its request id for :func:`root_span`."""
    try:
        response = sync_ask(mesh.gateway, "POST", f"{API}/chat", {"question": "How does the scheduler assign jobs?"})
        body = response.json()
    except Exception as exc:  # noqa: BLE001 - the gateway itself may be what is down
        return {"http": 0, "error": type(exc).__name__}
    picked = ("status", "answer", "answer_status", "finish_reason", "sources_basis", "degraded", "code")
    return {"http": response.status_code, "request_id": response.headers.get("x-request-id", ""),
            **{key: body.get(key) for key in picked}, "sources": len(body.get("sources") or []),
            "error": (body.get("error") or {}).get("code")}


def root_span(mesh: DrillMesh, request_id: str) -> dict:
    """How the gateway's server span of that request ended, from the mesh's span file (what
    `ragmesh trace` reads): status, its description, the degraded flags and error.type."""
    if not request_id:
        return {}
    for record in read_span_records(default_span_file(mesh.state), containing=request_id.encode()):
        attributes = record.get("attributes") or {}
        if record.get("kind") == "SERVER" and attributes.get("ragmesh.request_id") == request_id:
            return {"status": record.get("status"), "status_message": record.get("status_message"),
                    "degraded": attributes.get("ragmesh.degraded"), "error_type": attributes.get("error.type")}
    return {}


def why_degraded(mesh: DrillMesh, request_id: str) -> list[dict]:
    """What the spans of one request say went wrong below the gateway: each span of its trace that
    ended ERROR or carries ``ragmesh.degraded`` (retrieval's embeddings span names its reason)."""
    trace_ids = {record.get("trace_id") for record in read_span_records(default_span_file(mesh.state),
                                                                        containing=request_id.encode())
                 if (record.get("attributes") or {}).get("ragmesh.request_id") == request_id}
    found = []
    for trace_id in sorted(t for t in trace_ids if t):
        for record in read_span_records(default_span_file(mesh.state), containing=trace_id.encode()):
            attributes = record.get("attributes") or {}
            if record.get("parent_id") and (record.get("status") == "ERROR" or "ragmesh.degraded" in attributes):
                found.append({"service": record.get("service"), "span": record.get("name"),
                              "reason": attributes.get("ragmesh.degraded") or record.get("status_message"),
                              "ms": round((record.get("end_ns", 0) - record.get("start_ns", 0)) / 1e6, 1)})
    return found


def unplanned(mesh: DrillMesh, samples: list[Sample], drill: Drill, *, most: int = 5) -> list[dict]:
    """The answers flagged beyond the drill's flags (its outage does not imply them), each with
    :func:`why_degraded`: a stray flag in CI names its cause (before: a bare count)."""
    stray = [s for s in samples if set(s.degraded) - drill.flags]
    return [{"op": s.op, "flags": sorted(set(s.degraded) - drill.flags), "request_id": s.request_id,
             "why": why_degraded(mesh, s.request_id) if s.request_id else []} for s in stray[:most]]


def clean(sample: Sample, drill: Drill) -> bool:
    return sample.answered and not (set(sample.degraded) & drill.flags) and sample.op in drill.ops


def probe_ok(mesh: DrillMesh, corpus: str) -> float | None:
    """monotonic time of an answered index status call (the indexer and its registry in
    PostgreSQL), else None."""
    try:
        response = sync_ask(mesh.gateway, "GET", f"{API}/internal/index/status?corpus={corpus}")
    except Exception:  # noqa: BLE001 - the probe only asks "answered yet?"
        return None
    return time.monotonic() if response.status_code == 200 else None


# The indexer arms its checkpoints from this file (ragmesh_indexer.checkpoints: FAULT_FILE_ENV, read at
# each checkpoint, deleted as the fault fires, so the restarted indexer runs clean). libs/ never
# imports a service, so the name is spelled out here; tests/e2e/test_drills.py checks the build fails.
FAULT_FILE_ENV = "RAGMESH_INDEXER_FAULT_FILE"
# After the first batch of the candidate's points is written, before its stats are recorded: a
# partial collection, a candidate row without stats.
MID_BUILD = "upserted-batch"


def fault_file(state: Path) -> Path:
    return state / "indexer-fault"


def interrupted_build(mesh: DrillMesh, corpus: str, old: int) -> subprocess.Popen:
    """A forced rebuild of the served corpus (a candidate, never promoted) during which the indexer
    dies at MID_BUILD: ``os._exit(137)``, no ``finally`` block run, as under SIGKILL. Returns once
    the old process is gone.

    Before: the drill SIGKILLed the indexer 1 s after starting the build, and in CI (2026-12-04)
    the build had already finished (exit 0; it reuses every vector of the active version). A
    build of a new corpus instead, killed once its candidate was registered, loaded the shared
    runtime with its embedding and cost the load's searches their rerank (a fresh clone's CI run)."""
    fault_file(mesh.state).write_text(MID_BUILD)
    build = subprocess.Popen([sys.executable, "-m", "ragmesh_cli.main", "index", "build", "--corpus", corpus,
                              "--force", "--addr", f"127.0.0.1:{mesh.ports.port('indexer')}"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for(lambda: mesh.children().get("indexer") != old)
    return build


def newest_version_state(mesh: DrillMesh, corpus: str) -> str:
    """The state of the corpus's newest version in the registry ("" when the status call fails)."""
    try:
        response = sync_ask(mesh.gateway, "GET", f"{API}/internal/index/status?corpus={corpus}")
    except Exception:  # noqa: BLE001 - the probe only reports what it saw
        return ""
    versions = response.json().get("versions", []) if response.status_code == 200 else []
    return versions[0]["state"] if versions else ""


def run_drill(mesh: DrillMesh, load: Load, drill: Drill, *, canary: str, corpus: str,
              store_down_s: float) -> Row:
    before = snapshot(mesh, canary, corpus)
    time.sleep(WARM_S)
    build = None
    if drill.kind == "service":
        old = mesh.children()[drill.name]
        if drill.name == "indexer":
            build = interrupted_build(mesh, corpus, old)
            killed_at = time.monotonic()
        else:
            killed_at = time.monotonic()
            kill(old)
        ready_during = readiness(mesh)
        chat = chat_during(mesh)
        wait_for(lambda: mesh.children().get(drill.name) not in (None, old) and mesh.healthy(drill.name))
    else:
        killed_at = time.monotonic()
        kill(mesh.store_pid(drill.name))
        ready_during = readiness(mesh)
        chat = chat_during(mesh)
        time.sleep(max(0.0, store_down_s - (time.monotonic() - killed_at)))
        mesh.restart_store(drill.name)
    back_at = time.monotonic()
    probe = ""
    if drill.ops:
        first = wait_for(lambda: next((s for s in load.since(back_at) if clean(s, drill)), None))
        recovered_at = first.ended
    else:
        recovered_at = wait_for(lambda: probe_ok(mesh, corpus))
        probe = "index status answered again"
    if build is not None:
        build.wait(timeout=120)
        probe = (f"interrupted build exited {build.returncode}; its candidate is "
                 f"{newest_version_state(mesh, corpus)}; status answered again")
    time.sleep(SETTLE_S)
    ended_at = time.monotonic()
    samples = load.since(killed_at, ended_at)
    after = snapshot(mesh, canary, corpus)
    chat["root_span"] = root_span(mesh, chat.get("request_id", ""))  # exported by now (every 200 ms)
    stray = unplanned(mesh, samples, drill)
    return Row(
        drill=drill.name,
        requests=len(samples),
        answered=sum(s.answered for s in samples),
        degraded=dict(Counter(flag for s in samples for flag in s.degraded)),
        errors=sum(not s.answered for s in samples),
        server_errors=dict(Counter(f"{s.status} {s.code}".strip() for s in samples if s.status >= 500)),
        outage_s=back_at - killed_at,
        recovery_s=max(0.0, recovered_at - back_at),
        data_lost=lost(before, after),
        probe=probe,
        ready_during=ready_during,
        chat_during=chat,
        unplanned=stray,
    )


# --- the hostile-caller cases of issue 12, against the same mesh -----------------------------------

def hostile_cases(mesh: DrillMesh, internal_root: Path, internal_corpus: str) -> list[tuple[str, str, str]]:
    """(case, expected, got) for privilege escalation through the index API (a token gateway on
    the same services, as Compose runs it) and for cross-origin callers (the embedded gateway)."""
    builder = mesh.create_token("drill-ci", ["rag:index:build", "rag:index:promote"])
    reader = mesh.create_token("drill-reader", ["rag:search", "rag:read", "rag:answer"])
    with mesh.token_gateway() as gateway:
        cases = _privilege_cases(gateway, builder, reader, internal_root, internal_corpus)
    return cases + _cross_origin_cases(mesh.gateway)


def _coded(response) -> str:
    try:
        return f"{response.status_code} {response.json().get('code', '')}".strip()
    except ValueError:
        return str(response.status_code)


def _privilege_cases(gateway: str, builder: str, reader: str, internal_root: Path,
                     internal_corpus: str) -> list[tuple[str, str, str]]:
    auth = {"Authorization": f"Bearer {builder}"}
    index = f"{API}/internal/index"
    coded = _coded

    cases = []
    mirror = sync_ask(gateway, "POST", f"{index}/build", {"corpus": "mirror@1", "root": str(internal_root),
                                                              "visibility": "public"}, headers=auth)
    cases.append(("build token publishes a mirror of an internal folder", "403 PERMISSION_DENIED", coded(mirror)))
    moved = sync_ask(gateway, "POST", f"{index}/build", {"corpus": internal_corpus, "visibility": "public"},
                     headers=auth)
    cases.append(("build token makes an internal corpus public", "403 PERMISSION_DENIED", coded(moved)))
    for root in ("/etc", f"{internal_root}/../../..", str(ROOT)):
        outside = sync_ask(gateway, "POST", f"{index}/build", {"corpus": "probe@1", "root": root}, headers=auth)
        cases.append((f"build token reads {root}", "403 ROOT_NOT_ALLOWED", coded(outside)))
    quiet = sync_ask(gateway, "POST", f"{index}/build", {"corpus": "mirror@1", "root": str(internal_root)},
                     headers=auth)
    if quiet.status_code == 200:
        sync_ask(gateway, "POST", f"{index}/promote",
                 {"corpus": "mirror@1", "index_version": quiet.json()["index_version"]}, headers=auth)
        time.sleep(2.5)  # the gateway's corpus list is cached for 2 s
    hits = sync_ask(gateway, "POST", f"{API}/search", {"query": "scheduler", "filters": {"corpus": "mirror@1"}},
                    headers={"Authorization": f"Bearer {reader}"})
    cases.append(("a mirror built without admin is internal: a reader finds nothing in it", "200 0 results",
                  f"{hits.status_code} {len(hits.json().get('results', []))} results"))
    nul = sync_ask(gateway, "GET", f"{index}/status?corpus=%00", headers=auth)
    cases.append(("NUL in a query parameter", "400 INVALID_CHARACTER", coded(nul)))
    reason = sync_ask(gateway, "POST", f"{index}/rollback", {"corpus": internal_corpus, "reason": "a\x00b"},
                      headers=auth)
    cases.append(("NUL in a rollback reason", "400 INVALID_CHARACTER", coded(reason)))
    return cases


def _cross_origin_cases(gateway: str) -> list[tuple[str, str, str]]:
    cases = []
    plain = sync_ask(gateway, "POST", f"{API}/search", content=b'{"query": "q"}',
                     headers={"content-type": "text/plain", "origin": "https://evil.example"})
    cases.append(("cross-origin simple request (text/plain JSON)", "415 UNSUPPORTED_MEDIA_TYPE", _coded(plain)))
    form = sync_ask(gateway, "POST", f"{API}/internal/index/rollback", content=b"corpus=docs%40main",
                    headers={"content-type": "application/x-www-form-urlencoded", "origin": "https://evil.example"})
    cases.append(("cross-origin form post to an admin route", "415 UNSUPPORTED_MEDIA_TYPE", _coded(form)))
    preflight = sync_ask(gateway, "OPTIONS", f"{API}/search", headers={
        "origin": "https://evil.example", "access-control-request-method": "POST"})
    cases.append(("CORS preflight from another origin", "no Access-Control-Allow-Origin",
                  "no Access-Control-Allow-Origin" if "access-control-allow-origin" not in preflight.headers
                  else f"allowed {preflight.headers['access-control-allow-origin']}"))
    return cases


# --- the run -----------------------------------------------------------------------------------------

def prepare(mesh: DrillMesh, corpus_folder: Path) -> tuple[str, str, Path, str]:
    """(canary session, served corpus id, internal folder, internal corpus id)."""
    served = f"{corpus_folder.resolve().name}@main"
    internal_root = mesh.state / "corpora" / "internal"
    shutil.copytree(corpus_folder, internal_root)
    internal = "internal@1"
    done = subprocess.run([sys.executable, "-m", "ragmesh_cli.main", "index", "ci", "--corpus", internal,
                           "--source", str(internal_root), "--visibility", "internal",
                           "--addr", f"127.0.0.1:{mesh.ports.port('indexer')}"],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"indexing the internal corpus failed:\n{done.stderr[-3000:]}")
    first = sync_ask(mesh.gateway, "POST", f"{API}/chat", {"question": "How does the scheduler assign jobs?"})
    canary = first.json()["session_id"]
    return canary, served, internal_root, internal


def run(corpus: Path, *, clients: int, only: list[str], store_down_s: float, state: Path | None = None,
        log=print, say=lambda line: print(line, file=sys.stderr, flush=True)) -> dict:
    """The drills on a fresh mesh: ``log`` gets each table row, ``say`` what happens meanwhile."""
    created = state is None
    state = state or Path(tempfile.mkdtemp(prefix="ragmesh-drills-"))
    state.chmod(0o755)  # embedded PostgreSQL runs as `nobody` when we are root
    mesh = DrillMesh(state, corpus, env={FAULT_FILE_ENV: str(fault_file(state))})
    started = time.monotonic()
    mesh.start()
    say(f"mesh serving in {time.monotonic() - started:.1f}s at {mesh.gateway} (state {state})")
    load = Load(mesh.gateway, clients=clients)
    try:
        canary, served, internal_root, internal = prepare(mesh, corpus)
        cases = hostile_cases(mesh, internal_root, internal)
        load.start()
        rows = []
        for drill in DRILLS:
            if only and drill.name not in only:
                continue
            say(f"drill: {drill.name}")
            row = run_drill(mesh, load, drill, canary=canary, corpus=served, store_down_s=store_down_s)
            log(row.table_row())
            rows.append(row)
        load.stop()
        restarts = [line for line in mesh.log().splitlines() if "restarting it in" in line]
        result = {"rows": [asdict(r) for r in rows], "cases": cases, "restarts": restarts,
                  "samples": len(load.samples), "gateway": mesh.gateway}
    except BaseException:
        say(f"drills failed; the mesh's logs stay in {state}")
        raise
    finally:
        load.stop()
        mesh.stop()
    if created:
        shutil.rmtree(state, ignore_errors=True)
    return result


def smoke_pass() -> int:
    """No fault: two clients of the load against the running mesh, and the cross-origin cases."""
    gateway = RunningMesh.from_env().gateway_url
    load = Load(gateway, clients=2)
    load.start()
    deadline = time.monotonic() + TIMEOUT_S / 6  # a loaded machine starts the load thread late
    time.sleep(WARM_S)
    while len(load.samples) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    load.stop()
    answered = [s for s in load.samples if s.answered]
    cases = _cross_origin_cases(gateway)
    wrong = [(case, expected, got) for case, expected, got in cases if got != expected]
    print(json.dumps({"smoke": True, "samples": len(load.samples), "answered": len(answered), "cases": len(cases),
                      "wrong": wrong}))
    if not answered or wrong:
        raise SystemExit("the load got no answer, or a hostile case changed" if not wrong else f"changed: {wrong}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=str(ROOT / "tests" / "fixtures" / "e2e_corpus"))
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--only", default="", help="comma-separated drill names")
    parser.add_argument("--store-down-s", type=float, default=3.0)
    parser.add_argument("--json", default="", help="also write the results here")
    args = parse_args(parser)
    if args.smoke:
        return smoke_pass()
    only = [name for name in args.only.split(",") if name]
    print(TABLE_HEAD)
    result = run(Path(args.corpus), clients=args.clients, only=only, store_down_s=args.store_down_s,
                 log=lambda line: print(line, flush=True))
    print()
    print("| hostile case | expected | got |\n|---|---|---|")
    for case, expected, got in result["cases"]:
        print(f"| {case} | {expected} | {got} |")
    if args.json:
        Path(args.json).write_text(as_json(result), encoding="utf-8")
    worst = max((r["recovery_s"] or 0.0 for r in result["rows"]), default=0.0)
    print(f"\n{result['samples']} requests in all; slowest recovery {worst:.2f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
