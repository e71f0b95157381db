"""Answer quality through the real mesh: one JSON line per split of an answer set.

    .venv/bin/python bench/eval_answers.py --dataset /work/shared/datasets/xquad-en-qa
    .venv/bin/python bench/eval_answers.py --dataset tests/fixtures/product_docs_qa --records out.jsonl
    .venv/bin/python bench/eval_answers.py --dataset DIR --url http://127.0.0.1:8080 [--token T]
    .venv/bin/python bench/eval_answers.py --dataset /work/shared/datasets/xquad-en-qa --split check \
        --sample 60,20 --seed 1 --generator llm
    .venv/bin/python bench/eval_answers.py --smoke

Without ``--url`` it starts the embedded mesh (``ragmesh_cli.mesh.Mesh``: CPU runtime and the
five services) on free loopback ports with a fresh PostgreSQL database on 127.0.0.1:5432 and a
state dir under /tmp, indexes ``DIR/corpus`` through the real indexer (``ragmesh index ci``), and
asks every question through the gateway's SSE chat stream (``POST /api/rag/v1/chat/stream``, what
the widget reads), one at a time. With ``--url`` it asks a running gateway, whose corpora must
already hold ``DIR/corpus``. ``--generator llm`` starts the embedded mesh with the runtime's llm
profile (a GGUF model through llama.cpp, docs/runtime.md) instead of the extractive answerer.
``--sample A,U --seed N`` asks a seeded random A answerable and U unanswerable questions of the
chosen split: the same seed gives the same questions to every generator.

Printed, one line each: ``split`` ``all``, then ``tune`` and ``check`` (bench/answer_set.py:
answerable questions split by their file, unanswerable ones by id; thresholds are tuned on
``tune`` and ``check`` shows whether a gain holds on articles never tuned on). Fields: answer_hit
(a gold text appears in the answer), citation_hit (a cited source's text holds a gold text),
false_refusal_rate, refusal_rate_unanswerable, withheld_rate, answer length in words, latency to
the first answer token and to the end, p50/p95 at the client, the model, the machine's load
average (before and after) and the commit.

``--from-records FILE`` asks nothing: it prints the summary of the records a run wrote (a run
stopped before its end included; records are written as each answer arrives).

``--smoke`` starts the embedded mesh on tests/fixtures/product_docs_qa, asks two questions (one
answerable, one not) and exits non-zero when the stream's events or the summary's fields are not
the ones this script reads.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

from ragmesh_bench.answer_set import SPLITS, Outcome, Question, load_questions, split_of, summarize

ROOT = Path(__file__).resolve().parents[1]
SMOKE_DATASET = ROOT / "tests" / "fixtures" / "product_docs_qa"
GENERATORS = ("extractive", "llm")
# What a summary line must hold; --smoke fails when one is missing.
SUMMARY_FIELDS = ("answer_hit", "citation_hit", "false_refusal_rate", "refusal_rate_unanswerable", "withheld_rate",
                  "answer_words_mean", "first_token_ms_p50", "first_token_ms_p95", "latency_ms_p50", "latency_ms_p95")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", type=Path, help="folder with corpus/ and questions.jsonl")
    p.add_argument("--url", default="", help="a running gateway (default: start the embedded mesh)")
    p.add_argument("--token", default=os.environ.get("RAGMESH_TOKEN", ""), help="bearer token for --url")
    p.add_argument("--split", default="all", choices=SPLITS, help="ask only this half (default: all)")
    p.add_argument("--limit", type=int, default=0, help="ask only the first N questions of the split (0: all)")
    p.add_argument("--records", type=Path, help="write one JSON line per question (answer, status, hits)")
    p.add_argument("--label", default="", help="a name for this run, repeated in every line")
    p.add_argument("--top-k", type=int, default=0, help="sources per answer (0: the gateway's default)")
    p.add_argument("--generator", choices=GENERATORS, default=None,
                   help="the embedded mesh's answer generator (default: the runtime's, extractive)")
    p.add_argument("--sample", type=_sample, default=None, metavar="A,U",
                   help="a seeded random A answerable and U unanswerable questions of the split")
    p.add_argument("--seed", type=int, default=1, help="the --sample seed")
    p.add_argument("--smoke", action="store_true", help="a quick pass that fails when the API changed")
    p.add_argument("--from-records", type=Path, default=None, metavar="FILE",
                   help="summarize the records of an earlier (or stopped) run instead of asking")
    args = p.parse_args(argv)
    if args.smoke:
        args.dataset, args.sample, args.split, args.seed = SMOKE_DATASET, (1, 1), "all", 1
    if args.dataset is None and not args.from_records:
        p.error("--dataset is required (or --smoke, --from-records)")
    if args.url and args.generator:
        p.error("--generator starts an embedded mesh; a running gateway (--url) answers with its own")
    return args


def _sample(text: str) -> tuple[int, int]:
    try:
        answerable, unanswerable = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("--sample takes A,U: two counts, e.g. 60,20") from None
    return answerable, unanswerable


def sample_questions(questions: list[Question], answerable: int, unanswerable: int, seed: int) -> list[Question]:
    """A seeded sample: the same questions for every run with this seed, and a smaller sample is
    the start of a larger one (``12,4`` are among ``60,20``), so runs of different sizes compare."""
    chosen = []
    for wanted, count in ((True, answerable), (False, unanswerable)):
        pool = sorted((q for q in questions if q.answerable == wanted), key=lambda q: q.id)
        if count > len(pool):
            raise SystemExit(f"--sample asks {count} questions of a pool of {len(pool)}")
        random.Random(f"{seed}:{wanted}").shuffle(pool)
        chosen += pool[:count]
    return sorted(chosen, key=lambda q: q.id)


def say(message: str) -> None:
    print(f"eval: {message}", file=sys.stderr, flush=True)


def ask(http: httpx.Client, question: Question, top_k: int) -> Outcome:
    """One question through the SSE chat stream: the answer, its cited sources, the terminal event."""
    from httpx_sse import connect_sse

    body: dict = {"question": question.question}
    if top_k:
        body["top_k"] = top_k
    answer, cited, first_token, done = "", [], None, None
    started = time.perf_counter()
    with connect_sse(http, "POST", "/api/rag/v1/chat/stream", json=body) as source:
        if source.response.status_code != 200:
            source.response.read()
            code = _json_or_empty(source.response.text).get("code", source.response.status_code)
            return Outcome(question, f"error:{code}", "", [], (time.perf_counter() - started) * 1000)
        for event in source.iter_sse():
            data = json.loads(event.data) if event.data else {}
            if event.event == "token":
                first_token = first_token or time.perf_counter()
                answer += data["text"]
            elif event.event == "sources":
                cited = data["sources"] if data.get("basis", "cited") == "cited" else []
            elif event.event == "done":
                done = data
                break
            elif event.event == "error":
                done = {"answer_status": f"error:{data.get('code', 'unknown')}"}
                break
    latency = (time.perf_counter() - started) * 1000
    if done is None:
        raise SystemExit("the chat stream ended without a done or error event: the API changed")
    status = done["answer_status"]
    first_ms = (first_token - started) * 1000 if first_token else None
    return Outcome(question, status, answer, [s.get("content") or s.get("quote") or "" for s in cited], latency,
                   [s.get("url", "") for s in cited], first_token_ms=first_ms,
                   finish_reason=done.get("finish_reason", ""))


def _json_or_empty(text: str) -> dict:
    try:
        payload = json.loads(text)
    except ValueError:
        return {}
    return payload if isinstance(payload, dict) else {}


def run_questions(url: str, token: str, questions: list[Question], top_k: int,
                  records: Path | None = None) -> list[Outcome]:
    """Every question in turn; each record is written as soon as it is known (a long run that is
    stopped keeps what it measured)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    outcomes = []
    out = records.open("w", encoding="utf-8") if records else None
    with httpx.Client(base_url=url, headers=headers, timeout=300) as http:
        for n, question in enumerate(questions, 1):
            outcomes.append(ask(http, question, top_k))
            if out:
                out.write(json.dumps({**outcomes[-1].record(), "split": split_of(question),
                                      "load_average": machine()["load_average"]}, ensure_ascii=False) + "\n")
                out.flush()
            if n % 10 == 0:
                say(f"{n}/{len(questions)} asked")
    return outcomes


def machine() -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True)
    return {"commit": commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else ""),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


def library_of(dataset: Path) -> str:
    """The library an answer set is indexed as: its folder's name, lower case, dashes."""
    return "".join(ch if ch.isalnum() else "-" for ch in dataset.resolve().name.lower()).strip("-")


class EmbeddedMesh:
    """The six processes on free ports, a scratch database, the corpus indexed."""

    VERSION = "eval"  # the version the corpus is indexed as

    def __init__(self, corpus: Path, library: str, generator: str | None = None) -> None:
        from ragmesh_bench.harness import DEFAULT_POSTGRES as DEFAULT_PG
        from ragmesh_bench.harness import database_url, psql

        from ragmesh_cli.mesh import Mesh, MeshPorts, generator_env

        self._psql, self._pg = psql, os.environ.get("RAGMESH_TEST_POSTGRES_URL", DEFAULT_PG)
        self._db = f"ragmesh_answers_{uuid.uuid4().hex[:8]}"
        self._psql(self._pg, f"CREATE DATABASE {self._db}")
        self._state = Path(tempfile.mkdtemp(prefix="ragmesh-answers-"))
        self.mesh = Mesh(state_dir=self._state, ports=MeshPorts.free_block(), extra_env={
            "RAGMESH_POSTGRES_URL": database_url(self._pg, self._db),
            "RAGMESH_REDIS_URL": os.environ.get("RAGMESH_REDIS_URL", "redis://127.0.0.1:6379/15"),
            "RAGMESH_SESSION_PREFIX": f"ragmesh:eval:{uuid.uuid4().hex[:8]}",
            "RAGMESH_LOG_LEVEL": os.environ.get("RAGMESH_LOG_LEVEL", "WARNING"),
            **generator_env(generator),
        })
        self.corpus, self.library = corpus, library

    def __enter__(self) -> "EmbeddedMesh":
        try:
            self.mesh.start(timeout=240, log=say)
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "ragmesh_cli.main", "index", "ci", "--corpus", str(self.corpus),
                 "--library", self.library, "--version", self.VERSION],
                env=self.mesh.env(), capture_output=True, text=True, timeout=3600)
            if done.returncode != 0:
                raise SystemExit(f"index ci failed:\n{done.stderr[-3000:]}")
            say(f"indexed {self.corpus} in {time.perf_counter() - started:.0f}s")
        except BaseException:
            self.__exit__()
            raise
        return self

    @property
    def url(self) -> str:
        return self.mesh.gateway_url

    def __exit__(self, *exc) -> None:
        self.mesh.stop()
        from ragmesh_bench.harness import drop_database

        drop_database(self._pg, self._db)
        import shutil

        shutil.rmtree(self._state, ignore_errors=True)


def outcomes_from_records(path: Path) -> list[Outcome]:
    """The outcomes a run recorded. A record keeps whether a cited source held a gold text, not the
    sources' text, so a hit stands in as the gold itself: the summary's citation_hit is the same."""
    outcomes = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        question = Question(r["id"], r["question"], r["answerable"], tuple(r["golds"]), None, r.get("kind", ""))
        outcomes.append(Outcome(question, r["status"], r["answer"], list(question.answers) if r["citation_hit"] else [],
                                r["latency_ms"], r["cited_urls"], r.get("first_token_ms"), r.get("finish_reason", "")))
    return outcomes


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_records:
        outcomes = outcomes_from_records(args.from_records)
        print(json.dumps({"records": str(args.from_records), "label": args.label or None, "split": args.split,
                          **summarize(outcomes)}), flush=True)
        return 0
    questions = load_questions(args.dataset)
    if args.split != "all":
        questions = [q for q in questions if split_of(q) == args.split]
    if args.sample:
        questions = sample_questions(questions, *args.sample, args.seed)
    if args.limit:
        questions = questions[: args.limit]
    library = library_of(args.dataset)
    load_before = machine()["load_average"]
    if args.url:
        outcomes = run_questions(args.url, args.token, questions, args.top_k, args.records)
        model = _model(args.url, args.token)
    else:
        with EmbeddedMesh(args.dataset / "corpus", library, args.generator) as mesh:
            outcomes = run_questions(mesh.url, "", questions, args.top_k, args.records)
            model = _model(mesh.url, "")
    head = {"dataset": args.dataset.name, "label": args.label or None, "model": model,
            "generator": args.generator or ("extractive" if not args.url else None),
            "sample": list(args.sample) if args.sample else None, "seed": args.seed if args.sample else None,
            **machine(), "load_average_before": load_before}
    splits = ["all", "tune", "check"] if args.split == "all" and not args.sample else [args.split]
    for split in splits:
        chosen = [o for o in outcomes if split == "all" or split_of(o.question) == split]
        summary = summarize(chosen)
        print(json.dumps({**head, "split": split, **summary}), flush=True)
        if args.smoke:
            return _smoke_verdict(summary, model)
    return 0


def _smoke_verdict(summary: dict, model: str) -> int:
    missing = [name for name in SUMMARY_FIELDS if name not in summary]
    if missing or summary["errors"] or not model:
        say(f"smoke failed: missing {missing}, errors {summary['errors']}, model {model!r}")
        return 1
    return 0


def _model(url: str, token: str) -> str:
    """The model the answers came from: asked once more of the gateway, it is in ``model``."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        payload = httpx.post(f"{url}/api/rag/v1/chat", json={"question": "What is this documentation about?"},
                             headers=headers, timeout=120).json()
        return payload.get("model", "")
    except (httpx.HTTPError, ValueError):
        return ""


if __name__ == "__main__":
    sys.exit(main())
