"""Calibrate the extractive answerer offline: replay saved evidence through it in-process.

    # 1. save what the gateway retrieves for every question (the chat's own search: top 5, content),
    #    from a running gateway, or (without --url) from eval_answers.py's embedded mesh
    .venv/bin/python bench/tune_answerer.py dump --dataset DIR --url http://127.0.0.1:PORT --corpus LIB@VER \
        --out /tmp/evidence.jsonl
    .venv/bin/python bench/tune_answerer.py dump --dataset DIR --top-k 8 --out /tmp/evidence.jsonl
    # 2. answer every saved question with the runtime's answerer, for each threshold asked
    .venv/bin/python bench/tune_answerer.py replay --dataset DIR --evidence /tmp/evidence.jsonl --split tune \
        --min-score 0.3,0.35,0.4

Step 2 loads the runtime's models (verified like the runtime does) and builds the evidence prompt
the generation service would send, so the answer is the one ``/v1/chat/completions`` gives for
the same sources; it prints one JSON line per setting, with the metrics of bench/answer_set.py and
``evidence_hit``: the share of answerable questions whose saved sources hold a gold text.
Tune on ``--split tune`` only; ``check`` is for the report. The real mesh figures come from
bench/eval_answers.py. ``--smoke`` replays two built-in questions (one answerable, one not) and
exits non-zero unless the answerer's API and the printed fields are what this script expects.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import httpx
import msgspec

from ragmesh_bench.answer_set import SPLITS, Outcome, contains_gold, load_questions, split_of, summarize
from ragmesh_bench.harness import RunningMesh
from ragmesh_bench.smoke import parse_args, scratch_folder, tiny_answer_set


def dump(args: argparse.Namespace) -> int:
    if not args.url:
        return _dump_from_embedded_mesh(args)
    questions = load_questions(args.dataset)
    with httpx.Client(base_url=args.url, timeout=120) as http, args.out.open("w", encoding="utf-8") as out:
        for q in questions:
            body = {"query": q.question, "top_k": args.top_k, "include_content": True, "filters": {"corpus": args.corpus}}
            results = http.post("/api/rag/v1/search", json=body).raise_for_status().json()["results"]
            sources = [{"id": r["source_id"], "title": r["title"], "heading": " > ".join(r["heading_path"]),
                        "text": r.get("content") or r["quote"]} for r in results]
            out.write(json.dumps({"id": q.id, "sources": sources}, ensure_ascii=False) + "\n")
    return 0


def _dump_from_embedded_mesh(args: argparse.Namespace) -> int:
    """``dump`` without ``--url``: bench/eval_answers.py's embedded mesh (CPU runtime, the five
    services, a scratch database) indexes ``DIR/corpus`` the way an eval run does, then the dump."""
    from eval_answers import EmbeddedMesh, library_of

    library = library_of(args.dataset)
    with EmbeddedMesh(args.dataset / "corpus", library) as mesh:
        args.url, args.corpus = mesh.url, f"{library}@{EmbeddedMesh.VERSION}"
        return dump(args)


def replay(args: argparse.Namespace) -> int:
    from ragmesh_runtime.generator.extractive import ExtractiveAnswerer
    from ragmesh_runtime.generator.prompt_protocol import EvidencePrompt, EvidenceSource
    from ragmesh_runtime.generator.word_neighbours import WordNeighbours
    from ragmesh_runtime.models import load_models
    from ragmesh_runtime.settings import GeneratorSettings, RuntimeSettings

    settings = RuntimeSettings()
    models = load_models(settings)
    evidence = {row["id"]: row["sources"] for row in map(json.loads, args.evidence.read_text().splitlines())}
    questions = [q for q in load_questions(args.dataset) if args.split == "all" or split_of(q) == args.split]
    overrides = [dict(zip(args.vary, values)) for values in _grid(args)]
    # The signals do not depend on the weights: compute them once, weigh them per setting.
    neighbours = WordNeighbours.shared()  # one set of static word vectors for every setting
    base = ExtractiveAnswerer(models.encoder, GeneratorSettings.from_env(), neighbours)  # env: the signals themselves
    prepared = []
    for q in questions:
        saved = evidence[q.id][: args.sources or None]
        sources = tuple(EvidenceSource(s["id"], s["title"], s["heading"], s["text"]) for s in saved)
        prompt = EvidencePrompt(sources, q.question)
        candidates = base.candidates(prompt) if sources else []
        prepared.append((q, prompt, base.features(q.question, candidates) if candidates else []))
    # The ceiling retrieval sets: the share of answerable questions whose saved sources hold a gold text.
    answerable = [(q, prompt) for q, prompt, _ in prepared if q.answerable]
    evidence_hit = round(sum(any(contains_gold(s.text, q.answers) for s in prompt.sources)
                             for q, prompt in answerable) / len(answerable), 4) if answerable else None
    for override in overrides:
        answerer = ExtractiveAnswerer(models.encoder, msgspec.structs.replace(GeneratorSettings.from_env(), **override),
                                      neighbours)
        outcomes = []
        for q, prompt, features in prepared:
            if not features:
                outcomes.append(Outcome(q, "insufficient_evidence", "", [], 0.0))
                continue
            answer = answerer.decide(prompt, [answerer.combine(f) for f in features])
            by_id = {s.id: s.text for s in prompt.sources}
            cited = list(dict.fromkeys(unit.source_id for unit in answer.units))
            outcomes.append(Outcome(q, "answered" if answer.sufficient else "insufficient_evidence", answer.text,
                                    [by_id[c] for c in cited], 0.0))
        summary = summarize(outcomes)
        for field in ("latency_ms_p50", "latency_ms_p95", "withheld_rate", "errors"):
            summary.pop(field)
        print(json.dumps({"split": args.split, **override, **summary, "evidence_hit": evidence_hit}), flush=True)
        if args.show_misses:
            for o in outcomes:
                r = o.record()
                if (o.question.answerable and not r["answer_hit"]) or (not o.question.answerable and o.answered):
                    print(json.dumps({k: r[k] for k in ("id", "kind", "question", "golds", "status", "answer")},
                                     ensure_ascii=False), file=sys.stderr)
    return 0


def _grid(args: argparse.Namespace) -> list[tuple]:
    import itertools

    return list(itertools.product(*[[_number(v) for v in values.split(",")] for values in args.values])) or [()]


def _number(text: str):
    return float(text) if "." in text else int(text)


def smoke(args: argparse.Namespace) -> int:
    """dump from the running mesh's gateway, then replay the evidence with one setting."""
    mesh = RunningMesh.from_env()
    args.dataset, args.url, args.corpus = tiny_answer_set(), mesh.gateway_url, mesh.corpus
    args.top_k, args.sources = 5, 0
    args.out = args.evidence = scratch_folder() / "evidence.jsonl"
    dump(args)
    args.split, args.show_misses, args.vary, args.values = "all", False, ["min_score"], ["0.5"]
    return replay(args)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("dump")
    d.add_argument("--dataset", required=True, type=Path)
    d.add_argument("--url", default="", help="a running gateway (default: start eval_answers.py's embedded mesh)")
    d.add_argument("--corpus", default="", help="LIB@VER the gateway holds the dataset as (with --url)")
    d.add_argument("--out", required=True, type=Path)
    d.add_argument("--top-k", type=int, default=5, help="sources saved per question (replay --sources takes fewer)")
    r = sub.add_parser("replay")
    r.add_argument("--dataset", required=True, type=Path)
    r.add_argument("--evidence", required=True, type=Path)
    r.add_argument("--split", default="tune", choices=SPLITS)
    r.add_argument("--set", dest="pairs", action="append", default=[], metavar="FIELD=V1,V2",
                   help="a GeneratorSettings field and the values to try (repeatable: a grid)")
    r.add_argument("--sources", type=int, default=0, help="answer from only the first N saved sources (0: all)")
    r.add_argument("--show-misses", action="store_true", help="print each miss to stderr (last setting wins)")
    args = parse_args(p, argv)
    if args.smoke:
        return smoke(args)
    if args.command == "dump":
        if args.url and not args.corpus:
            p.error("dump --url needs --corpus LIB@VER")
        return dump(args)
    args.vary = [pair.split("=", 1)[0] for pair in args.pairs]
    args.values = [pair.split("=", 1)[1] for pair in args.pairs]
    return replay(args)


if __name__ == "__main__":
    sys.exit(main())
