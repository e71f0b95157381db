"""The ``--smoke`` pass every bench script has: tiny data, seconds, a non-zero exit when the API it
measures changed. tests/e2e/test_bench_smoke.py runs each one against the e2e session mesh.

A script calls :func:`parse_args` instead of ``parser.parse_args``: with ``--smoke`` its required
options are not required (the smoke pass supplies them, usually from :func:`tiny_beir` and the mesh
of :class:`ragmesh_bench.harness.RunningMesh`).
"""

from __future__ import annotations

import argparse
import atexit
import json
import shutil
import tempfile
from pathlib import Path

from ragmesh_bench.harness import SMOKE_CORPUS_FOLDER

SMOKE_HELP = ("a few seconds on tiny data against the running mesh its environment names "
              "(tests/e2e/test_bench_smoke.py); exits non-zero if the API it measures changed")
SPLITS = ("train", "validation", "dev", "test")
# Questions about tests/fixtures/e2e_corpus, and the file (the BEIR doc id) that answers each.
QUESTIONS = (
    ("q1", "How often do workers report heartbeats?", "architecture"),
    ("q2", "Where are job results stored by default?", "architecture"),
    ("q3", "Which Python version does Quokka need?", "install"),
    ("q4", "What is the default queue depth of the scheduler?", "install"),
)


def parse_args(parser: argparse.ArgumentParser, argv: list[str] | None = None) -> argparse.Namespace:
    """``parser.parse_args`` with a ``--smoke`` flag that makes every required option optional."""
    import sys

    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    words = sys.argv[1:] if argv is None else argv
    if "--smoke" in words:
        for action in parser._actions:
            action.required = False
    return parser.parse_args(argv)


def scratch_folder() -> Path:
    """A temporary folder removed when the process ends."""
    folder = Path(tempfile.mkdtemp(prefix="ragmesh-smoke-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def tiny_beir(folder: Path | None = None) -> Path:
    """A BEIR folder whose documents are the e2e corpus's files (doc id = file stem, so a hit's
    ``source_path`` maps back to its doc through ``beir_dataset.file_name``), four queries, and the
    same qrels for every split."""
    folder = folder or scratch_folder() / "quokka-beir"
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for path in sorted(SMOKE_CORPUS_FOLDER.rglob("*.md")):
            out.write(json.dumps({"_id": path.stem, "title": "", "text": path.read_text(encoding="utf-8")}) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        for qid, text, _ in QUESTIONS:
            out.write(json.dumps({"_id": qid, "text": text}) + "\n")
    for split in SPLITS:
        (folder / "qrels" / f"{split}.tsv").write_text(
            "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{doc}\t1\n" for q, _, doc in QUESTIONS),
            encoding="utf-8")
    return folder


def tiny_answer_set(folder: Path | None = None) -> Path:
    """An answer set (libs/ragmesh_bench/answer_set.py's layout) over the e2e corpus: the four questions with
    their gold texts, and one the corpus cannot answer."""
    folder = folder or scratch_folder() / "quokka-answers"
    shutil.copytree(SMOKE_CORPUS_FOLDER, folder / "corpus", dirs_exist_ok=True)
    gold = {"q1": "every five seconds", "q2": "SQLite", "q3": "Python 3.11", "q4": "forty-two"}
    rows = [{"id": qid, "question": text, "answerable": True, "answers": [gold[qid]], "file": f"guide/{doc}.md"}
            for qid, text, doc in QUESTIONS]
    rows.append({"id": "q5", "question": "What colour is the moon over Lisbon?", "answerable": False,
                 "answers": [], "file": None})
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return folder


# What one line of `bench/eval_retrieval.py --dump` holds per hit; its smoke pass checks its own
# dump against this, and the tuning scripts' smoke passes read candidates of this shape.
CANDIDATE_KEYS = ("doc", "quote", "embedded", "dense", "sparse", "title")


def tiny_candidates(beir: Path) -> Path:
    """Candidates as eval_retrieval.py --dump writes them: every document for every query."""
    docs = [json.loads(line) for line in (beir / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    path = beir.parent / "candidates.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for qid, text, answer in QUESTIONS:
            hits = [{"doc": d["_id"], "quote": d["text"][:300], "embedded": d["text"][:500], "title": d["_id"],
                     "dense": 0.8 if d["_id"] == answer else 0.3, "sparse": 2.0 if d["_id"] == answer else 0.5}
                    for d in docs]
            out.write(json.dumps({"qid": qid, "query": text, "hits": hits}) + "\n")
    return path
