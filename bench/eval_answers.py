"""Answer quality through the real mesh: one JSON line per split of an answer set.

    .venv/bin/python bench/eval_answers.py --dataset /work/shared/datasets/xquad-en-qa
    .venv/bin/python bench/eval_answers.py --dataset tests/fixtures/product_docs_qa --records out.jsonl
    .venv/bin/python bench/eval_answers.py --dataset DIR --url http://127.0.0.1:8080 [--token T]

Without ``--url`` it starts the embedded mesh (``ragmesh_cli.mesh.Mesh``: CPU runtime and the
five services) on free loopback ports with a fresh PostgreSQL database on 127.0.0.1:5432 and a
state dir under /tmp, indexes ``DIR/corpus`` through the real indexer (``ragmesh index ci``), and
asks every question through the gateway's ``POST /api/rag/v1/chat``, one at a time. With
``--url`` it asks a running gateway, whose corpora must already hold ``DIR/corpus``.

Printed, one line each: ``split`` ``all``, then ``tune`` and ``check`` (bench/answer_set.py:
answerable questions split by their file, unanswerable ones by id; thresholds are tuned on
``tune`` and ``check`` shows whether a gain holds on articles never tuned on). Fields: answer_hit
(a gold text appears in the answer), citation_hit (a cited source's text holds a gold text),
false_refusal_rate, refusal_rate_unanswerable, withheld_rate, answer length in words, latency
p50/p95 at the client, the model, the machine's load average and the commit.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from answer_set import SPLITS, Outcome, Question, load_questions, split_of, summarize  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dataset", required=True, type=Path, help="folder with corpus/ and questions.jsonl")
    p.add_argument("--url", default="", help="a running gateway (default: start the embedded mesh)")
    p.add_argument("--token", default=os.environ.get("RAGMESH_TOKEN", ""), help="bearer token for --url")
    p.add_argument("--split", default="all", choices=SPLITS, help="ask only this half (default: all)")
    p.add_argument("--limit", type=int, default=0, help="ask only the first N questions of the split (0: all)")
    p.add_argument("--records", type=Path, help="write one JSON line per question (answer, status, hits)")
    p.add_argument("--label", default="", help="a name for this run, repeated in every line")
    p.add_argument("--top-k", type=int, default=0, help="sources per answer (0: the gateway's default)")
    return p.parse_args(argv)


def say(message: str) -> None:
    print(f"eval: {message}", file=sys.stderr, flush=True)


def ask(http: httpx.Client, question: Question, top_k: int) -> Outcome:
    body: dict = {"question": question.question}
    if top_k:
        body["top_k"] = top_k
    started = time.perf_counter()
    response = http.post("/api/rag/v1/chat", json=body)
    latency = (time.perf_counter() - started) * 1000
    payload = response.json()
    if response.status_code != 200:
        return Outcome(question, f"error:{payload.get('code', response.status_code)}", "", [], latency)
    status = payload.get("answer_status") or f"error:{(payload.get('error') or {}).get('code', 'unknown')}"
    cited = payload.get("sources", []) if payload.get("sources_basis") == "cited" else []
    return Outcome(question, status, payload.get("answer", ""),
                   [s.get("content") or s.get("quote") or "" for s in cited], latency,
                   [s.get("url", "") for s in cited])


def run_questions(url: str, token: str, questions: list[Question], top_k: int) -> list[Outcome]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    outcomes = []
    with httpx.Client(base_url=url, headers=headers, timeout=300) as http:
        for n, question in enumerate(questions, 1):
            outcomes.append(ask(http, question, top_k))
            if n % 50 == 0:
                say(f"{n}/{len(questions)} asked")
    return outcomes


def machine() -> dict:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True)
    return {"commit": commit.stdout.strip() + ("+dirty" if dirty.stdout.strip() else ""),
            "load_average": [round(x, 2) for x in os.getloadavg()]}


class EmbeddedMesh:
    """The six processes on free ports, a scratch database, the corpus indexed."""

    def __init__(self, corpus: Path, library: str) -> None:
        sys.path.insert(0, str(ROOT / "bench"))
        from eval_mesh import DEFAULT_PG
        from ragmesh_bench.harness import database_url, psql

        from ragmesh_cli.mesh import Mesh, MeshPorts

        self._psql, self._pg = psql, os.environ.get("RAGMESH_TEST_POSTGRES_URL", DEFAULT_PG)
        self._db = f"ragmesh_answers_{uuid.uuid4().hex[:8]}"
        self._psql(self._pg, f"CREATE DATABASE {self._db}")
        self._state = Path(tempfile.mkdtemp(prefix="ragmesh-answers-"))
        self.mesh = Mesh(state_dir=self._state, ports=MeshPorts.free_block(), extra_env={
            "RAGMESH_POSTGRES_URL": database_url(self._pg, self._db),
            "RAGMESH_REDIS_URL": os.environ.get("RAGMESH_REDIS_URL", "redis://127.0.0.1:6379/15"),
            "RAGMESH_SESSION_PREFIX": f"ragmesh:eval:{uuid.uuid4().hex[:8]}",
            "RAGMESH_LOG_LEVEL": os.environ.get("RAGMESH_LOG_LEVEL", "WARNING"),
        })
        self.corpus, self.library = corpus, library

    def __enter__(self) -> "EmbeddedMesh":
        try:
            self.mesh.start(timeout=240, log=say)
            started = time.perf_counter()
            done = subprocess.run(
                [sys.executable, "-m", "ragmesh_cli.main", "index", "ci", "--corpus", str(self.corpus),
                 "--library", self.library, "--version", "eval"],
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    questions = load_questions(args.dataset)
    if args.split != "all":
        questions = [q for q in questions if split_of(q) == args.split]
    if args.limit:
        questions = questions[: args.limit]
    library = "".join(ch if ch.isalnum() else "-" for ch in args.dataset.resolve().name.lower()).strip("-")
    if args.url:
        outcomes = run_questions(args.url, args.token, questions, args.top_k)
        model = _model(args.url, args.token)
    else:
        with EmbeddedMesh(args.dataset / "corpus", library) as mesh:
            outcomes = run_questions(mesh.url, "", questions, args.top_k)
            model = _model(mesh.url, "")
    if args.records:
        with args.records.open("w", encoding="utf-8") as out:
            for outcome in outcomes:
                out.write(json.dumps({**outcome.record(), "split": split_of(outcome.question)},
                                     ensure_ascii=False) + "\n")
    head = {"dataset": args.dataset.name, "label": args.label or None, "model": model, **machine()}
    splits = ["all", "tune", "check"] if args.split == "all" else [args.split]
    for split in splits:
        chosen = [o for o in outcomes if split == "all" or split_of(o.question) == split]
        print(json.dumps({**head, "split": split, **summarize(chosen)}), flush=True)
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
