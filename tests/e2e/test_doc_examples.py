"""Every example of README.md and docs/*.md, run: a page whose example drifts from what ragmesh does fails.

The pages' shell sessions run in bash as a newcomer would type them, with this checkout's virtual
environment first on PATH, and what they print is compared with the page (tests/doc_examples.py
says what is loosened, and tests/unit/test_doc_example_matcher.py that a drift is still caught).
Blocks marked ``<!-- example: not-run reason=... -->`` are counted by reason, not run.

Where a session runs (its page's context below, or ``<!-- example: run on=CONTEXT -->``):

- ``mesh``: the session's embedded mesh (tests/e2e/conftest.py: CPU runtime, the five services,
  the quokka corpus) with the pelican corpus of docs/answers.md, on the ports the pages show
  (8080..., or ``--port-base 31000`` where docs/answers.md uses it); ``$G`` is its gateway.
- ``runtime``: that mesh's CPU model runtime, shown as 127.0.0.1:8091.
- ``doubles``: the gateway over the gRPC test doubles, as docs/api.md says its outputs were taken
  (tests/integration/gateway/serve_doubles.py), authentication off.
- ``doubles-tokens``: the same with ``RAGMESH_AUTH_MODE=tokens`` (anonymous callers refused) in a
  database of its own, ``RAGMESH_CORPUS_ROOTS=docs@1=`` a folder of ``guide/pageN.md`` files, and
  ``$RAGMESH_TOKEN`` a token of scopes rag:search, rag:read and rag:answer unless the page
  exported its own. ``doubles-limits``: that plus ``RAGMESH_RATE_LIMITS="search=0.1/3,*=20/40"``.
- ``offline``: nothing listens on 127.0.0.1:8080.

Each page runs in a folder of its own (``.venv``, ``bench``, ``deploy`` and ``tests`` linked from
the checkout, ``mixed`` a copy of tests/fixtures/mixed_corpus, ``.ragmesh-state`` the mesh's state
folder); exports, the folder and the values bound from outputs carry over from block to block.

To update an example, run this test with ``RAGMESH_DOC_EXAMPLES_RECORD=<folder>``: each command's
output is written there as the page would show it (the test's ports and folders written back).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from doc_examples import ROOT, Block, Shell, blocks_of, in_run_order, run_block, summary, user_environment
from ragmesh_bench.harness import NotServing, free_port, serve_on_free_port
from ragmesh_cli.mesh import SERVICES, Mesh, MeshPorts
from ragmesh_cli.mesh.lifecycle import stop_process

# The mesh pages reach the session's mesh through request.getfixturevalue: under make test this module
# runs on the worker that holds it (tests/worker_groups.py).
pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("mesh")]

MIXED_CORPUS = ROOT / "tests" / "fixtures" / "mixed_corpus"
SERVE_DOUBLES = ROOT / "tests" / "integration" / "gateway" / "serve_doubles.py"
NPM_BIN = ROOT / "tests" / "conformance" / "npm" / "node_modules" / ".bin"
DOCUMENTED_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"

PAGE_CONTEXT = {
    "README.md": "mesh",
    "docs/agents.md": "doubles-tokens",
    "docs/answers.md": "mesh",
    "docs/api.md": "doubles",
    "docs/indexing.md": "mesh",
    "docs/operations.md": "offline",
    "docs/runtime.md": "runtime",
}
BLOCKS = blocks_of(ROOT)
PAGES = sorted({b.path for b in BLOCKS if b.kind == "session"})


def conftest_of(request: pytest.FixtureRequest, folder: str):
    """A conftest module as pytest loaded it (several share the name ``conftest``: no plain import)."""
    return request.config.pluginmanager.getplugin(str(ROOT / folder / "conftest.py"))


@dataclass
class Context:
    env: dict[str, str] = field(default_factory=dict)
    substitutions: list[tuple[str, str]] = field(default_factory=list)  # (as the pages write it, here)


def loopback(doc_port: int, port: int) -> list[tuple[str, str]]:
    return [(f"127.0.0.1:{doc_port}", f"127.0.0.1:{port}"), (f"localhost:{doc_port}", f"localhost:{port}")]


# --- the mesh ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mesh_context(mesh: Mesh, pelican_corpus: str, e2e_database: str) -> Context:
    """The session's mesh with the pelican corpus docs/answers.md indexes (conftest.py's
    pelican_corpus: the same library, indexed once a session), on the pages' ports."""
    substitutions: list[tuple[str, str]] = []
    for documented in (MeshPorts(), MeshPorts(31000)):
        for svc in SERVICES:
            substitutions += loopback(documented.port(svc), mesh.ports.port(svc))
            substitutions.append((f"--port {documented.port(svc)}", f"--port {mesh.ports.port(svc)}"))
            if svc in ("retrieval", "rerank", "generation", "indexer"):
                substitutions += loopback(documented.metrics_port(svc), mesh.ports.metrics_port(svc))
    substitutions.append(("-h 127.0.0.1 -U postgres -d ragmesh_dev", f"-d {e2e_database}"))
    env = {
        "G": mesh.gateway_url,
        "RAGMESH_URL": mesh.gateway_url,  # the CLI's default, http://127.0.0.1:8080, on the pages
        "RAGMESH_INDEXER_ADDR": f"127.0.0.1:{mesh.ports.port('indexer')}",
    }
    return Context(env=env, substitutions=substitutions)


@pytest.fixture(scope="module")
def runtime_context(mesh: Mesh) -> Context:
    return Context(substitutions=loopback(8091, mesh.ports.port("runtime")))


# --- the gateway over its test doubles ---------------------------------------------------------------


@contextmanager
def doubles_gateway(env: dict[str, str], log: Path) -> Iterator[int]:
    """serve_doubles.py as a process of its own, as docs/api.md ran it; yields its port."""

    def start(port: int) -> subprocess.Popen:
        with log.open("ab") as out:
            return subprocess.Popen([sys.executable, str(SERVE_DOUBLES), "--port", str(port)],
                                    env=user_environment(env), stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    try:
        port, process = serve_on_free_port(start, "/health/live", timeout=90)
    except NotServing as exc:
        pytest.fail(f"serve_doubles.py: {exc}\n{log.read_text(errors='replace')[-3000:]}")
    try:
        yield port
    finally:
        stop_process(process.pid, timeout=15.0)
        process.wait()


@pytest.fixture  # a page of its own: its tokens and grants meet no other page's
def token_database(request: pytest.FixtureRequest, pg_url: str) -> Iterator[str]:
    with conftest_of(request, "tests/e2e").scratch_database(pg_url) as url:
        yield url


@pytest.fixture
def reader_token(token_database: str) -> str:
    """A token of the three reading scopes, as docs/api.md's MCP and OpenAI examples hold in $RAGMESH_TOKEN."""
    done = subprocess.run(
        ["ragmesh", "token", "create", "--client", "doc-examples", "--scope", "rag:search,rag:read,rag:answer"],
        env=user_environment({"RAGMESH_POSTGRES_URL": token_database}), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["token"]


@pytest.fixture(scope="module")
def pages_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files behind the doubles' canned chunks: guide/pageN.md holds "Line i of page N."."""
    root = tmp_path_factory.mktemp("doubles-pages")
    (root / "guide").mkdir()
    for page in range(1, 7):
        (root / "guide" / f"page{page}.md").write_text(
            "".join(f"Line {line} of page {page}.\n" for line in range(1, 21)), encoding="utf-8")
    return root


def _doubles_context(port: int, **env: str) -> Context:
    substitutions = loopback(8080, port)
    if "RAGMESH_POSTGRES_URL" in env:
        substitutions.append((DOCUMENTED_POSTGRES_URL, env["RAGMESH_POSTGRES_URL"]))
    # The CLI's default gateway, http://127.0.0.1:8080 on the pages, is this one.
    return Context(env={"RAGMESH_URL": f"http://127.0.0.1:{port}", **env}, substitutions=substitutions)


@pytest.fixture(scope="module")
def doubles_context(tmp_path_factory: pytest.TempPathFactory, pages_folder: Path) -> Iterator[Context]:
    settings = {"RAGMESH_CORPUS_ROOTS": f"docs@1={pages_folder}"}
    with doubles_gateway(settings, tmp_path_factory.mktemp("doubles") / "gateway.log") as port:
        yield _doubles_context(port)


@pytest.fixture
def doubles_tokens_context(tmp_path_factory: pytest.TempPathFactory, token_database: str, reader_token: str,
                           pages_folder: Path) -> Iterator[Context]:
    settings = {"RAGMESH_AUTH_MODE": "tokens", "RAGMESH_ALLOW_ANONYMOUS": "false",
                "RAGMESH_POSTGRES_URL": token_database, "RAGMESH_CORPUS_ROOTS": f"docs@1={pages_folder}"}
    with doubles_gateway(settings, tmp_path_factory.mktemp("doubles-tokens") / "gateway.log") as port:
        yield _doubles_context(port, RAGMESH_TOKEN=reader_token, RAGMESH_POSTGRES_URL=token_database)


@pytest.fixture
def doubles_limits_context(tmp_path_factory: pytest.TempPathFactory, token_database: str, reader_token: str,
                           redis_url: str) -> Iterator[Context]:
    settings = {"RAGMESH_AUTH_MODE": "tokens", "RAGMESH_POSTGRES_URL": token_database,
                "RAGMESH_REDIS_URL": redis_url, "RAGMESH_RATE_LIMITS": "search=0.1/3,*=20/40",
                "RAGMESH_RATE_LIMIT_PREFIX": f"ragmesh:rl:doc-{uuid.uuid4().hex[:12]}"}
    with doubles_gateway(settings, tmp_path_factory.mktemp("doubles-limits") / "gateway.log") as port:
        yield _doubles_context(port, RAGMESH_TOKEN=reader_token, RAGMESH_POSTGRES_URL=token_database)


@pytest.fixture(scope="module")
def offline_context() -> Context:
    port = free_port()  # free a moment ago, and nothing of this test listens there
    return Context(env={"RAGMESH_URL": f"http://127.0.0.1:{port}"}, substitutions=loopback(8080, port))


CONTEXTS = {
    "mesh": "mesh_context",
    "runtime": "runtime_context",
    "doubles": "doubles_context",
    "doubles-tokens": "doubles_tokens_context",
    "doubles-limits": "doubles_limits_context",
    "offline": "offline_context",
}


# --- the pages ---------------------------------------------------------------------------------------

# Programs a session may need beyond bash, Python and this checkout; CI installs them (.ci/run).
PROGRAMS = ("curl", "jq", "psql", "nginx")


def page_folder(tmp_path: Path, page: str, request: pytest.FixtureRequest) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    for name in (".venv", "bench", "deploy", "tests"):
        (work / name).symlink_to(ROOT / name)
    if page == "docs/indexing.md":
        shutil.copytree(MIXED_CORPUS, work / "mixed", symlinks=True)
        (work / ".ragmesh-state").symlink_to(request.getfixturevalue("mesh").state_dir)
    return work


def npx_standing_in(folder: Path) -> Path | None:
    """`npx -y @modelcontextprotocol/inspector@2.12.0` without the npm registry: the Inspector that
    `make conformance-tools` pinned in tests/conformance/npm (the same version)."""
    inspector = NPM_BIN / "mcp-inspector"
    if not inspector.exists():
        return None
    package = json.loads((NPM_BIN.parents[1] / "package.json").read_text(encoding="utf-8"))
    pinned = package["dependencies"]["@modelcontextprotocol/inspector"]
    folder.mkdir()
    npx = folder / "npx"
    npx.write_text(
        "#!/bin/sh\n"
        "[ \"$1\" = -y ] && shift\n"
        f"[ \"$1\" = @modelcontextprotocol/inspector@{pinned} ] || "
        "{ echo \"npx here runs only the pinned Inspector\" >&2; exit 127; }\n"
        "shift\n"
        f"PATH=\"{NPM_BIN}:$PATH\" HOME=\"{folder}\" MCP_INSPECTOR_SECRET_STORE=memory exec \"{inspector}\" \"$@\"\n",
        encoding="utf-8")
    npx.chmod(0o755)
    return folder


def missing_programs(block: Block, path: str) -> list[str]:
    text = block.text
    missing = [p for p in PROGRAMS if f"{p} " in text and shutil.which(p, path=path) is None]
    if "npx " in text and shutil.which("npx", path=path.split(os.pathsep, 1)[0]) is None:
        missing.append("the MCP Inspector of tests/conformance/npm (make conformance-tools)")
    return missing


PAGE_SUBSTITUTIONS = {
    "docs/indexing.md": [("/tmp/demo", "{work}")],
    "docs/operations.md": [("/tmp/edge", "{work}/edge")],
}


@pytest.mark.parametrize("page", PAGES)
def test_the_examples_of(page: str, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    blocks = [b for b in BLOCKS if b.path == page]
    work = page_folder(tmp_path, page, request)
    env = user_environment()
    if (shim := npx_standing_in(tmp_path / "bin")) is not None:
        env["PATH"] = f"{shim}{os.pathsep}{env['PATH']}"
    base_env = dict(env)
    shell = Shell(cwd=work, env=env)
    own: set[str] = set()  # variables the page itself exported: they win over its context's
    page_substitutions = [(doc, here.format(work=work)) for doc, here in PAGE_SUBSTITUTIONS.get(page, [])]
    reports, skipped, ran, sessions = [], [], 0, 0
    for block in in_run_order(blocks):
        if missing := missing_programs(block, shell.env["PATH"]):
            skipped.append(f"{block.where} needs {', '.join(missing)}")
            continue
        context: Context = request.getfixturevalue(CONTEXTS[block.context or PAGE_CONTEXT[page]])
        for name, value in context.env.items():
            if name not in own:
                shell.env[name] = value
        shell.substitutions = context.substitutions + page_substitutions
        before = dict(shell.env)
        outcomes = run_block(block, shell)
        own |= {name for name, value in shell.env.items() if before.get(name) != value}
        # also=CONTEXT: the same block again as a reader who skipped the page's earlier sections
        # (none of its exports or values) would run it there, e.g. without authentication.
        for other in block.also:
            elsewhere: Context = request.getfixturevalue(CONTEXTS[other])
            fresh = Shell(cwd=work, env={**base_env, **elsewhere.env},
                          substitutions=elsewhere.substitutions + page_substitutions)
            outcomes += run_block(block, fresh)
        ran += len(outcomes)
        sessions += 1 + len(block.also)
        reports += [outcome.report() for outcome in outcomes if outcome.problems]
        if record := os.environ.get("RAGMESH_DOC_EXAMPLES_RECORD"):
            for outcome in outcomes:
                name = f"{outcome.where.replace('/', '_').replace(':', '-')}.txt"
                (Path(record) / name).write_text(
                    f"exit {outcome.exit_code} in {outcome.seconds:.1f} s\n--- stdout\n{outcome.page_stdout}"
                    f"--- stderr\n{outcome.page_stderr}", encoding="utf-8")
    print(f"{page}: {sessions} session(s) run ({ran} commands), {len(skipped)} skipped; "
          f"the other blocks: {summary(b for b in blocks if b.kind != 'session')}")
    assert not reports, (f"{len(reports)} example(s) of {page} differ from what they print today:\n\n"
                         + "\n\n".join(reports))
    if skipped:
        conftest_of(request, "tests").skip_or_fail("; ".join(skipped))


# --- the README's follow-up commands, after `ragmesh up --port-base N` ---------------------------------

README_FOLLOW_UP = "test_the_readme_follow_up_commands_work_unchanged_after_up_on_other_ports"
SERVING = "serving; Ctrl-C to stop"
SUMMARY = re.compile(r"ragmesh: docs@main (v\d{17}-[0-9a-f]{6}): (\d+) documents, (\d+) chunks \((\d+) embedded, "
                     r"(\d+) reused\); gates (\d+)/(\d+) passed; serving; full report: "
                     r"\.ragmesh-state/logs/index-docs@main\.json")


def readme_follow_up_commands() -> list[str]:
    """The commands of the README block that names this test, as a user copies them (comments off)."""
    [block] = [b for b in BLOCKS if b.path == "README.md" and b.marker is not None and README_FOLLOW_UP in b.marker.note]
    return [re.sub(r"\s+#\s.*$", "", line).strip() for line in block.text.splitlines() if line.strip()]


@pytest.mark.timeout(900)
def test_the_readme_follow_up_commands_work_unchanged_after_up_on_other_ports() -> None:
    """`ragmesh up --port-base N` in a folder, then the README's next commands, as printed, from that
    folder: each one finds the mesh through its state folder (issue 23: after --port-base they all
    went to the default ports). `up` says its build in one line and keeps the report in its logs."""
    # Not pytest's tmp_path (0700): as root the embedded PostgreSQL runs as a user that must enter it.
    work = Path(tempfile.mkdtemp(prefix="ragmesh-readme-"))
    work.chmod(0o755)
    (work / ".venv").symlink_to(ROOT / ".venv")
    (work / "docs").mkdir()
    shutil.copy(ROOT / "docs" / "architecture.md", work / "docs")  # what the two questions ask about
    home = work / "home"
    (home / "my-docs").mkdir(parents=True)
    (home / "my-docs" / "notes.md").write_text("# Notes\n\nThe quokka colony lives on Rottnest Island.\n",
                                               encoding="utf-8")
    env = user_environment({"HOME": str(home)})
    ports = MeshPorts.free_block()
    log = work / "up.log"
    with log.open("wb") as out:
        up = subprocess.Popen([".venv/bin/ragmesh", "up", "--corpus", "docs", "--port-base", str(ports.base)],
                              cwd=work, env=env, stdout=subprocess.PIPE, stderr=out, stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 600
        while SERVING not in log.read_text(errors="replace"):
            assert up.poll() is None, f"ragmesh up exited {up.returncode}:\n{log.read_text(errors='replace')}"
            assert time.monotonic() < deadline, log.read_text(errors="replace")
            time.sleep(0.5)
        said = log.read_text(errors="replace")
        summary = SUMMARY.search(said)
        assert summary, said
        version, documents, chunks, embedded, reused, passed, gates = summary.groups()
        assert int(documents) == 1 and int(chunks) == int(embedded) + int(reused) > 0 and int(gates) > 0
        report = json.loads((work / ".ragmesh-state" / "logs" / "index-docs@main.json").read_text(encoding="utf-8"))
        assert report["build"]["index_version"] == report["promote"]["active_version"] == version
        assert report["validation"]["passed"] is True
        assert sum(g["passed"] for g in report["validation"]["gates"]) == int(passed)
        assert int(chunks) == report["build"]["chunks"]
        assert '{"build"' not in said  # the report is no longer printed

        runs = {}
        for command in readme_follow_up_commands():
            done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=600, stdin=subprocess.DEVNULL)
            runs[command.split()[1] if command.startswith(".venv") else command.split()[0]] = done
            assert done.returncode == 0, f"`{command}` exited {done.returncode}:\n{done.stderr}\n{done.stdout}"
        assert list(runs) == ["search", "answer", "trace", "curl", "index", "corpus", "token", "down"]
        assert json.loads(runs["search"].stdout)["results"]
        answered = json.loads(runs["answer"].stdout)  # a pipe: the contract JSON
        assert answered["answer_status"] == "answered" and answered["sources"], answered
        assert answered["index_versions"] == [version]
        assert answered["request_id"] in runs["trace"].stdout
        assert json.loads(runs["curl"].stdout)["results"]
        assert json.loads(runs["index"].stdout)["promote"]["corpus"] == "my-docs@main"
        assert json.loads(runs["corpus"].stdout)["dry_run"] is True
        assert json.loads(runs["token"].stdout)["token"].startswith("rmk_")
        assert up.wait(timeout=120) == 0
        assert not (work / ".ragmesh-state" / "run" / "mesh.json").exists()  # no record of a mesh that is gone
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        subprocess.run([".venv/bin/ragmesh", "down"], cwd=work, env=env, capture_output=True, timeout=180)
        shutil.rmtree(work, ignore_errors=True)
